#!/bin/bash
# tier.sh - the cluster tier on one machine: three memcached on loopback
# ports, three mounts of one snapshot with their own caches (0.4x the
# dataset each), epochs split perm[k::3] with a new permutation each epoch,
# every byte compared with the source (tier_epochs.py).  Faults: kill -9 of
# one memcached mid-epoch and its empty restart, SIGSTOP/SIGCONT (a hung
# peer), corrupted values; .control's tier lines; a bad tier_servers file.
# Every memcached and mount is started here and stopped by its PID (trap).
. "$(dirname "$0")/lib.sh"

command -v memcached >/dev/null || { echo "SKIP: memcached is missing (apt-get install memcached)"; exit 77; }
EPOCHS="$(dirname "$0")/tier_epochs.py"
NODES=3
MC_PORTS=()
MC_PIDS=()
NODE_PIDS=()
TIER=$WORK/tier
# The job's tier_key, shared by every mount of the suite.
KEY=$WORK/tier.key
# The tier's own warnings, expected when a fault is injected.
ALLOWED_LOG='tier server .* (stopped answering|holds a bad value)'

stop_memcached_all() {
	for pid in "${MC_PIDS[@]:-}"; do
		[ -n "$pid" ] || continue
		kill -CONT "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}

stop_nodes_all() {
	for k in $(seq 0 $((NODES - 1))); do
		mountpoint -q "$WORK/mnt$k" 2>/dev/null && { fusermount3 -u "$WORK/mnt$k" 2>/dev/null || umount -l "$WORK/mnt$k"; }
	done
	for pid in "${NODE_PIDS[@]:-}"; do
		[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	return 0
}
CLEANUP_HOOKS+=(stop_nodes_all stop_memcached_all)

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The memcached options the README recommends: values chained in 2 KiB
# chunks of one slab class, so a server fills to ~93% of -m (BENCHMARKS.md).
RECOMMENDED_MC_OPTS=(-o slab_chunk_max=2048 -f 8)

# start_memcached I: memcached I on its port, MC_MB MiB (16), refusing
# instead of evicting, with the recommended options.
start_memcached() {
	local i=$1 user=()
	[ "$(id -u)" = 0 ] && user=(-u root)
	memcached "${user[@]}" -l 127.0.0.1 -p "${MC_PORTS[$i]}" -U 0 -m "${MC_MB:-16}" -M -t 2 "${RECOMMENDED_MC_OPTS[@]}" &
	MC_PIDS[$i]=$!
	for _ in $(seq 1 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', ${MC_PORTS[$i]}), 1)" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "memcached $i did not start on port ${MC_PORTS[$i]}"
}

start_tier() {
	: >"$TIER"
	for i in $(seq 0 $((NODES - 1))); do
		MC_PORTS[$i]=$(free_port)
		start_memcached "$i"
		echo "127.0.0.1:${MC_PORTS[$i]}" >>"$TIER"
	done
}

# start_nodes [OPTIONS]: three mounts of $SRC, each with its own cache of 0.4x the dataset
# and a tier timeout of $TIER_TIMEOUT (default 100ms).
start_nodes() {
	local size
	size=$(du -sb "$SRC" | awk '{print int($1 * 0.4)}')
	for k in $(seq 0 $((NODES - 1))); do
		mkdir -p "$WORK/mnt$k"
		"$DLCACHE" mount "$SRC" "$WORK/mnt$k" -f -o "cache_dir=$WORK/cache$k,cache_size=$size,log_level=warning,policy=freeze,tier_key=$KEY,tier_timeout=${TIER_TIMEOUT:-100ms}${1:+,$1}" 2>>"$LOG" &
		NODE_PIDS[$k]=$!
	done
	for k in $(seq 0 $((NODES - 1))); do
		for _ in $(seq 1 300); do
			[ -e "$WORK/mnt$k/.stats" ] && break
			kill -0 "${NODE_PIDS[$k]}" 2>/dev/null || fail "node $k exited before its mount was ready"
			sleep 0.1
		done
	done
}

stop_nodes() {
	local rc
	for k in $(seq 0 $((NODES - 1))); do
		fusermount3 -u "$WORK/mnt$k" || fail "cannot unmount node $k"
		rc=0
		wait "${NODE_PIDS[$k]}" || rc=$?
		[ "$rc" = 0 ] || fail "node $k exited with status $rc"
	done
	NODE_PIDS=()
	rm -rf "$WORK"/cache?
	check_log
}

# epochs ARGS...: runs tier_epochs.py on the three mounts; its JSON lines in $WORK/epochs.
epochs() {
	python3 "$EPOCHS" "$SRC" "$WORK/mnt0" "$WORK/mnt1" "$WORK/mnt2" "$@" >"$WORK/epochs" ||
		fail "tier_epochs.py failed"
	cat "$WORK/epochs"
}

# field EPOCH NAME: one number of an epoch's line.
field() {
	python3 -c 'import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["epoch"] == int(sys.argv[2]):
        print(e[sys.argv[3]])' "$WORK/epochs" "$1" "$2"
}

# tier_sum NAME: a tier counter summed over every server of every mount.
tier_sum() {
	python3 -c 'import json, sys
total = 0
for m in sys.argv[2:]:
    for name, s in json.load(open(m + "/.stats")).get("tier", {}).items():
        if isinstance(s, dict):
            total += int(s[sys.argv[1]])
print(total)' "$1" "$WORK"/mnt?
}

# wait_all_up I: until every mount sees memcached I answering again (its
# breaker's back-off doubles from 0.5 s, so a server down for a few seconds
# is probed again within a few seconds).
wait_all_up() {
	local k up
	for k in $(seq 0 $((NODES - 1))); do
		for _ in $(seq 1 150); do
			up=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tier"][sys.argv[2]]["up"])' "$WORK/mnt$k/.stats" "127.0.0.1:${MC_PORTS[$1]}")
			[ "$up" = True ] && break
			sleep 0.1
		done
		expect_eq "node $k sees server $1 up" "$up" True
	done
}

no_wrong_no_failed() {
	local e
	for e in $(seq 0 $(($(wc -l <"$WORK/epochs") - 1))); do
		expect_eq "epoch $e: wrong reads" "$(field "$e" wrong)" 0
		expect_eq "epoch $e: failed reads" "$(field "$e" failed)" 0
	done
}

make_dataset "$SRC" 4 90 6000
"$DLCACHE" keygen "$KEY" >/dev/null

# From the second epoch the three caches plus the tier hold the dataset: the
# source is opened for at most 2% of the reads; memcached never evicts.
test_tier_serves_the_cluster() {
	start_tier
	# A get that took over 100 ms on a loaded machine opened the breaker
	# and sent reads to the source (48 of 720 once): this test counts
	# source opens, the hung-peer test times the breaker.
	TIER_TIMEOUT=1s start_nodes "tier_servers=$TIER"
	epochs --epochs 3
	no_wrong_no_failed
	local reads opens
	reads=$(field 1 reads)
	opens=$(( $(field 1 source_opens) + $(field 2 source_opens) ))
	[ $((opens * 100)) -le $((reads * 2 * 2)) ] || fail "epochs 1-2 opened the source $opens times for $((2 * reads)) reads (> 2%)"
	[ "$(field 1 tier_hits)" -gt 0 ] || fail "epoch 1 had no tier hits"
	expect_eq "memcached evictions" "$(tier_sum evictions)" 0
	expect_eq "memcached extstore losses" "$(tier_sum extstore_lost)" 0
	expect_eq "corrupt values" "$(tier_sum corrupt)" 0
	[ "$(tier_sum own_hits)" -le "$(tier_sum hits)" ] || fail "more own-node hits than hits"
	# Captured first: grep -q stops at the first match, and under pipefail
	# the writer's SIGPIPE would fail the pipeline.
	local prom
	prom=$("$DLCACHE" stat "$WORK/mnt0" --prometheus)
	grep -q '^dlcache_tier_hits{server="127.0.0.1:' <<<"$prom" ||
		fail "dlcache stat --prometheus shows no tier hits per server"
	stop_nodes
	stop_memcached_all
}

# kill -9 of a memcached mid-epoch, then an empty restart on its port: no
# read fails or is wrong, and the restarted server fills again.
test_killed_and_restarted_server() {
	start_tier
	# A kill fails a get at once (connection refused); the timeout only
	# decides when a slow get on a loaded machine trips the breaker,
	# which then skips the restarted server for a whole short epoch (one
	# 100 ms get under ASan left 49 opens of 360 after the refill).
	TIER_TIMEOUT=1s start_nodes "tier_servers=$TIER"
	epochs --epochs 1
	epochs --epochs 2 --seed 2 --fault "kill:${MC_PIDS[1]}" --fault-epoch 0
	wait "${MC_PIDS[1]}" 2>/dev/null || true
	no_wrong_no_failed
	start_memcached 1
	wait_all_up 1
	# The first epoch refills the empty server with what it reads from the
	# source; samples its nodes then served from their local caches are not
	# offered again, so the next epoch still opens a few, under 10% of reads.
	epochs --epochs 2 --seed 3
	no_wrong_no_failed
	[ "$(field 1 source_opens)" -lt "$(field 0 source_opens)" ] &&
		[ $(($(field 1 source_opens) * 10)) -le "$(field 1 reads)" ] ||
		fail "the restarted server was not refilled: $(field 0 source_opens) then $(field 1 source_opens) source opens"
	ALLOWED_LOG='tier server .* (stopped answering|holds a bad value)'
	stop_nodes
	stop_memcached_all
}

# A hung peer (SIGSTOP) delays a read by at most the tier timeout (100ms) and
# a source read; the breaker then skips it; after SIGCONT it serves again.
test_hung_server() {
	start_tier
	start_nodes "tier_servers=$TIER"
	epochs --epochs 1
	epochs --epochs 1 --seed 4 --fault "stop:${MC_PIDS[0]}" --fault-epoch 0
	no_wrong_no_failed
	[ "$(tier_sum timeouts)" -gt 0 ] || fail "the hung server caused no timeout"
	[ "$(tier_sum skips)" -gt 0 ] || fail "the breaker never skipped the hung server"
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 5 else 1)' "$(field 0 max_read_seconds)" ||
		fail "a read took $(field 0 max_read_seconds) s with a hung tier server"
	wait_all_up 0
	stop_nodes
	stop_memcached_all
}

# Values corrupted on the server are detected (xxh3), counted, deleted, and
# the bytes read from the source.
test_corrupt_values() {
	start_tier
	start_nodes "tier_servers=$TIER"
	epochs --epochs 1
	stop_nodes
	start_nodes "tier_servers=$TIER"
	epochs --epochs 1 --seed 5 --fault "corrupt:${MC_PORTS[2]}" --fault-epoch 0
	no_wrong_no_failed
	[ "$(tier_sum corrupt)" -gt 0 ] || fail "no corrupted value was detected"
	stop_nodes
	stop_memcached_all
}

# .control attaches and detaches a running mount; a bad line is refused.
test_control_lines() {
	start_tier
	start_nodes
	[ "$(tier_sum hits)" = 0 ] || fail "a mount without tier_servers shows a tier"
	MNT=$WORK/mnt0 control "tier $(tr '\n' ' ' <"$TIER")"$'\n' >/dev/null
	MNT=$WORK/mnt1 control "tier $(tr '\n' ' ' <"$TIER")"$'\n' >/dev/null
	MNT=$WORK/mnt2 control "tier $(tr '\n' ' ' <"$TIER")"$'\n' >/dev/null
	grep -q '"servers": 3' "$WORK/mnt0/.stats" || fail "tier HOST:PORT ... did not attach the tier"
	epochs --epochs 2
	no_wrong_no_failed
	[ "$(field 1 tier_hits)" -gt 0 ] || fail "no tier hits after attaching by .control"
	expect_eq "tier off" "$(MNT=$WORK/mnt0 control $'tier off\n')" ok
	grep -q '"tier"' "$WORK/mnt0/.stats" && fail "tier off left the tier attached"
	expect_eq "a bad server" "$(MNT=$WORK/mnt0 control $'tier nohost\n')" EINVAL
	grep -q "is not a tier server" "$WORK/mnt0/.stats" || fail "the bad tier line's cause is not in .stats"
	ALLOWED_LOG="$ALLOWED_LOG|\\.control: line 1: 'nohost' is not a tier server"
	stop_nodes
	ALLOWED_LOG='tier server .* (stopped answering|holds a bad value)'
	stop_memcached_all
}

# mount_sum NAME: a tier counter of $MNT summed over its servers.
mount_sum() {
	python3 -c 'import json, sys
print(sum(int(s[sys.argv[2]]) for s in json.load(open(sys.argv[1]))["tier"].values() if isinstance(s, dict)))' "$MNT/.stats" "$1"
}

# ranks FILE ORDER: a SCORE line per file of $WORK/big, ranked by name
# (up) or in reverse (down), and an epoch line.
ranks() {
	(cd "$WORK/big" && find train -type f | sort) | python3 -c '
import sys
paths = sys.stdin.read().split()
if sys.argv[1] == "down":
    paths.reverse()
n = len(paths)
sys.stdout.write("".join("%.6f %s\n" % ((i + 1) / n, p) for i, p in enumerate(paths)))
sys.stdout.write("epoch %s\n" % sys.argv[2])' "$1" "$2"
}

# When the tier cannot hold the dataset, ranks decide: an epoch line sets a
# threshold and only samples above it are offered; when the ranks turn
# over, the next epoch line has the owners remove the values that fell
# below it, and the samples that rose take their room.  (One mount, no
# local cache, three servers of 8 MiB on this node: 19 MB of values for a
# dataset of about 50 MB, so the samples above the first threshold are all
# below the second.)
test_ranks_decide_and_removal_makes_room() {
	local adds removed hits n
	make_dataset "$WORK/big" 2 100 250000
	MC_MB=8 start_tier
	start_daemon_from "$WORK/big" "policy=none,tier_servers=$TIER,tier_key=$KEY,tier_timeout=1s"
	wait_tier_known
	MNT=$MNT control "$(ranks up 1)" >/dev/null
	cat "$MNT"/train/*/* >/dev/null
	adds=$(mount_sum adds)
	n=$(find "$WORK/big" -type f | wc -l)
	[ "$adds" -gt 0 ] && [ "$adds" -lt "$n" ] || fail "with a threshold $adds of $n samples were added"
	# The ranks turn over: what was above is now below, and is removed.
	MNT=$MNT control "$(ranks down 2)" >/dev/null
	for _ in $(seq 1 100); do
		removed=$(mount_sum removed)
		[ "$removed" -ge "$adds" ] && break
		sleep 0.1
	done
	expect_eq "values removed after the ranks turned over" "$removed" "$adds"
	# The samples that rose are added in their room, and served from it.
	drop_caches
	cat "$MNT"/train/*/* >/dev/null
	[ "$(mount_sum adds)" -gt $((adds + adds / 2)) ] || fail "the samples that rose were not added: $(mount_sum adds) adds after $adds"
	hits=$(mount_sum hits)
	drop_caches
	cat "$MNT"/train/*/* >/dev/null
	[ "$(mount_sum hits)" -gt "$((hits + adds / 2))" ] || fail "the samples that rose are not served from the tier"
	expect_eq "memcached evictions" "$(mount_sum evictions)" 0
	stop_daemon
	stop_memcached_all
}

# Run with the recommended options, a server takes values until it is
# nearly full (>= 89% of -m; 91% measured, against 83-86% with memcached's
# defaults, whose size classes refuse while others have room), then refuses
# and is frozen; it never evicts.  Fails if the options are lost.
test_recommended_options_fill_the_server() {
	local fill limit
	make_dataset "$WORK/fill" 2 150 110000    # ~33 MB of 55-165 KB samples
	MC_MB=24 NODES=1 start_tier
	start_daemon_from "$WORK/fill" "policy=none,tier_servers=$TIER,tier_key=$KEY,tier_timeout=1s"
	wait_tier_known
	cat "$MNT"/train/*/* >/dev/null
	# A refusal freezes the server once the fill the health thread read
	# (every 250 ms) is past 85%: the first pass may refuse before it is
	# read; the misses of a second pass are refused again, and freeze it.
	sleep 0.6
	drop_caches
	cat "$MNT"/train/*/* >/dev/null
	for _ in $(seq 1 40); do
		[ "$(mount_sum full)" = 1 ] && break
		sleep 0.1
	done
	fill=$(mount_sum fill)
	limit=$(mount_sum limit)
	[ $((fill * 100)) -ge $((limit * 89)) ] ||
		fail "memcached holds $fill bytes of its $limit: less than 89% (its slab options lost?)"
	expect_eq "the server frozen once full" "$(mount_sum full)" 1
	[ "$(mount_sum refusals)" -gt 0 ] || fail "the server never refused: the dataset did not fill it"
	expect_eq "memcached evictions" "$(mount_sum evictions)" 0
	stop_daemon
	stop_memcached_all
}

# wait_tier_known: until every server of $MNT has been probed (its limit read).
wait_tier_known() {
	for _ in $(seq 1 100); do
		python3 -c 'import json, sys
sys.exit(0 if all(int(s["limit"]) > 0 for s in json.load(open(sys.argv[1]))["tier"].values() if isinstance(s, dict)) else 1)' "$MNT/.stats" && return 0
		sleep 0.05
	done
	fail "the tier's servers were never probed"
}

# A bad tier_servers file refuses the mount with one sentence.
test_bad_file() {
	local out
	printf '127.0.0.1:11211\nnot-a-server\n' >"$WORK/badtier"
	out=$("$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE,tier_servers=$WORK/badtier,tier_key=$KEY" 2>&1) &&
		fail "a bad tier_servers file was accepted"
	echo "$out" | grep -q "'not-a-server' is not a tier server; write HOST:PORT" || fail "unexpected message: $out"
	expect_eq "lines" "$(echo "$out" | wc -l)" 1
	out=$("$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE,tier_servers=$WORK/none,tier_key=$KEY" 2>&1) &&
		fail "a missing tier_servers file was accepted"
	echo "$out" | grep -q "cannot read the tier_servers file" || fail "unexpected message: $out"
}

# Under the sanitizers (tests/sanitize.sh) the fill test is left to the main
# build: it measures how full memcached's slabs get, which ASan does not
# change, and it is 10 s of CI.
[ -z "${DLC_SANITIZE:-}" ] || unset -f test_recommended_options_fill_the_server

run_tests
