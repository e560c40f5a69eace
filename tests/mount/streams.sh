#!/usr/bin/env bash
# Many block streams under a small memory_limit never stop (include/dlcache/
# budget.h, the rule): 32 readers, each streaming its own shard of a few
# blocks from a slow source, in a budget that holds the working sets of two
# of them.  Every reader ends within a bound with the source's bytes, a
# small file's miss made while they stream is answered, and unmount ends.
# Before the rule, a reader's block waited for memory that only the other
# waiting readers held: every reader, and every source thread, waited for
# ever, and so did unmount.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_lib.sh"

STREAMS=32
mkdir -p "$SRC/shards" "$SRC/small"
# Shards of four 1 MiB blocks and a short fifth, each a different length.
for i in $(seq 0 $((STREAMS - 1))); do
	head -c $((4 * 1024 * 1024 + 4096 * i + 5)) /dev/urandom >"$SRC/shards/s$i.tar"
done
for i in 0 1 2; do head -c $((60000 + i)) /dev/urandom >"$SRC/small/f$i.bin"; done

# give_up WHAT: the daemon's stacks, then the readers and the daemon (by the
# PIDs started here: a deadlocked daemon ends only with SIGKILL), then fail.
give_up() {
	local pid
	[ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null && dump_stacks "$DAEMON_PID"
	for pid in "${READERS[@]}"; do kill "$pid" 2>/dev/null || true; done
	if [ -n "$DAEMON_PID" ]; then
		kill -KILL "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=
	fi
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fail "$1"
}

# wait_readers SECONDS: every reader has ended by then, or give_up.
wait_readers() {
	local deadline=$((SECONDS + $1)) i
	for i in "${!READERS[@]}"; do
		while kill -0 "${READERS[$i]}" 2>/dev/null; do
			[ "$SECONDS" -lt "$deadline" ] ||
				give_up "reader $i of ${#READERS[@]} still waiting after $1 s"
			sleep 0.1
		done
	done
}

test_block_streams_in_a_small_budget_all_finish() {
	ALLOWED_LOG='^$'
	# 16 MiB of budget; a reader keeps up to 11 blocks (3, and 8 for the
	# kernel's 4 MiB readahead) and reads 4 ahead: about two working sets.
	start_daemon "refresh,cache_max_file=256K,block_size=1M,memory_limit=16M,source_delay=20ms,source_threads=16"
	local start=$SECONDS i
	READERS=()
	for i in $(seq 0 $((STREAMS - 1))); do
		( cmp "$MNT/shards/s$i.tar" "$SRC/shards/s$i.tar" && echo ok || echo bad ) \
			>"$WORK/stream.$i" 2>&1 &
		READERS+=($!)
	done
	# A small file's miss while the streams run is answered.
	sleep 0.5
	local running=0 pid
	for pid in "${READERS[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
	[ "$running" -gt 0 ] || fail "the streams ended before the small file was read: make them longer"
	timeout 20 cmp "$MNT/small/f1.bin" "$SRC/small/f1.bin" ||
		give_up "a small file's miss during the streams got no answer in 20 s, or wrong bytes"
	wait_readers 60
	for i in "${!READERS[@]}"; do
		wait "${READERS[$i]}" || true
		expect_eq "stream $i" "$(cat "$WORK/stream.$i")" ok
	done
	echo "   small file read with $running streams running"
	echo "   $STREAMS streams in $((SECONDS - start)) s; unbuffered reads $(stat_value unbuffered_reads), block misses $(stat_value block_misses), readaheads $(stat_value readaheads), memory waits $(stat_value memory.waits), peak $(stat_value memory.peak)"
	[ "$(stat_value memory.peak)" -le $((16 << 20)) ] ||
		fail "memory peak $(stat_value memory.peak) over the limit"
	expect_eq "memory held with every file closed" "$(stat_value memory.used)" 0
	# Unmount ends: no source thread is left waiting.
	fusermount3 -u "$MNT" || give_up "fusermount3 -u failed"
	local rc=0
	READERS=()
	wait_gone "$DAEMON_PID" 20 "the daemon after unmount"
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	expect_eq "daemon exit status" "$rc" 0
	check_log
}

run_tests
