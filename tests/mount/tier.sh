#!/bin/bash
# tier.sh - the cluster tier on one machine: three memcached on loopback
# ports, three mounts of one snapshot with their own caches (0.4x the
# dataset each), epochs split perm[k::3] with a new permutation each epoch,
# every byte compared with the source (tier_epochs.py).  Faults: kill -9 of
# one memcached mid-epoch and its empty restart, SIGSTOP/SIGCONT (a hung
# peer), corrupted values; .control's tier lines; a bad tier_servers file.
# An adversary on the tier's network (tier_adversary.py: memcached's text
# protocol) swaps, forges and replays values, a key holder seals wrong bytes
# for packed members: no wrong byte is served or kept.  Only the mount's
# owner steers the tier; tier_key is refused unless private and long.
# Every memcached and mount is started here and stopped by its PID (trap).
. "$(dirname "$0")/lib.sh"

command -v memcached >/dev/null || { echo "SKIP: memcached is missing (apt-get install memcached)"; exit 77; }
EPOCHS="$(dirname "$0")/tier_epochs.py"
ADVERSARY="$(dirname "$0")/tier_adversary.py"
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

# node_up K SOURCE [OPTIONS]: one mount of SOURCE on $WORK/mntK with its own
# cache $WORK/cacheK (kept across node_down), policy=freeze.
node_up() {
	mkdir -p "$WORK/mnt$1"
	"$DLCACHE" mount "$2" "$WORK/mnt$1" -f -o "cache_dir=$WORK/cache$1,cache_size=64M,log_level=warning,policy=freeze${3:+,$3}" 2>>"$LOG" &
	NODE_PIDS[$1]=$!
	for _ in $(seq 1 300); do
		[ -e "$WORK/mnt$1/.stats" ] && return 0
		kill -0 "${NODE_PIDS[$1]}" 2>/dev/null || fail "node $1 exited before its mount was ready"
		sleep 0.1
	done
	fail "node $1 did not mount in 30 s"
}

node_down() {
	local rc=0
	fusermount3 -u "$WORK/mnt$1" || fail "cannot unmount node $1"
	wait "${NODE_PIDS[$1]}" || rc=$?
	NODE_PIDS[$1]=
	[ "$rc" = 0 ] || fail "node $1 exited with status $rc"
}

# wrong_reads MNT TREE: "WRONG FAILED", the files of TREE read through MNT
# whose bytes differ from TREE's, and those whose read failed.
wrong_reads() {
	python3 - "$1" "$2" <<'PY'
import os, sys
mnt, tree = sys.argv[1], sys.argv[2]
wrong = failed = 0
for d, _, files in os.walk(tree):
    for f in files:
        rel = os.path.relpath(os.path.join(d, f), tree)
        try:
            with open(os.path.join(mnt, rel), "rb", buffering=0) as m, open(os.path.join(tree, rel), "rb") as t:
                wrong += m.read() != t.read()
        except OSError:
            failed += 1
print(wrong, failed)
PY
}

# same_size_tree DIR SEED: 96 files of 8 KiB, the same names for every
# SEED, other bytes and times: another version of one dataset.
same_size_tree() {
	python3 - "$1" "$2" <<'PY'
import os, random, sys
root, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
for i in range(96):
    d = os.path.join(root, "train", "c%d" % (i % 4))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "s%03d.bin" % i)
    with open(path, "wb") as f:
        f.write(rng.randbytes(8192))
    os.utime(path, (1600000000 + seed * 1000 + i,) * 2)
PY
}

# json_sum FIELD...: the sum of the adversary's counts named.
json_sum() {
	python3 -c 'import json, sys; c = json.loads(sys.argv[1]); print(sum(c[k] for k in sys.argv[2:]))' "$@"
}

# An adversary who reaches the tier's memcached but has no key: node A
# fills the tier; the adversary swaps values between samples of the same
# size, forges values in the old frame (xxh3 recomputed) and in the sealed
# frame, and replays values of another snapshot of the dataset (an older
# version: same names and sizes, other bytes); node B, with an empty cache,
# reads every sample.  No wrong byte is served, none is kept in B's cache
# (a remount without the tier serves it), every tampered value is counted
# in tier.corrupt.
test_adversary_without_the_key() {
	local counts tampered opts
	same_size_tree "$WORK/adv" 1
	same_size_tree "$WORK/adv_old" 2
	NODES=1 start_tier
	opts="tier_servers=$TIER,tier_key=$KEY,tier_timeout=1s"
	node_up 2 "$WORK/adv_old" "$opts"
	expect_eq "reads of the older snapshot" "$(wrong_reads "$WORK/mnt2" "$WORK/adv_old")" "0 0"
	node_down 2
	python3 "$ADVERSARY" keys "${MC_PORTS[0]}" >"$WORK/old_keys"
	expect_eq "values of the older snapshot" "$(wc -l <"$WORK/old_keys")" 96
	node_up 0 "$WORK/adv" "$opts"
	expect_eq "node A's reads" "$(wrong_reads "$WORK/mnt0" "$WORK/adv")" "0 0"
	node_down 0
	counts=$(python3 "$ADVERSARY" tamper "${MC_PORTS[0]}" "$WORK/old_keys")
	echo "adversary: $counts"
	for kind in swapped forged_old_frame forged_new_frame replayed; do
		[ "$(json_sum "$counts" $kind)" -ge 20 ] || fail "the adversary $kind too few values: $counts"
	done
	tampered=$(json_sum "$counts" swapped forged_old_frame forged_new_frame replayed)
	node_up 1 "$WORK/adv" "$opts"
	expect_eq "node B: wrong and failed reads" "$(wrong_reads "$WORK/mnt1" "$WORK/adv")" "0 0"
	expect_eq "node B: tier.corrupt" "$(MNT=$WORK/mnt1 stat_value tier.corrupt)" "$tampered"
	node_down 1
	# What B cached is the source's: served with no tier at all.
	node_up 1 "$WORK/adv"
	expect_eq "node B without the tier: wrong and failed reads" "$(wrong_reads "$WORK/mnt1" "$WORK/adv")" "0 0"
	expect_eq "node B without the tier: local hits" "$(MNT=$WORK/mnt1 stat_value hits)" 96
	node_down 1
	check_log
	stop_memcached_all
}

# A packed snapshot's members from the tier are held to the members' xxh3,
# as source reads are: a key holder (here, this test with the job's key)
# seals other bytes for every member; node B serves and keeps none of them.
test_packed_members_from_the_tier_are_checked() {
	local counts n opts
	python3 -c 'import cryptography' 2>/dev/null ||
		{ echo "SKIP: python3-cryptography is missing (apt-get install python3-cryptography)"; return 0; }
	"$DLCACHE" pack "$SRC" "$WORK/packed" >/dev/null
	NODES=1 start_tier
	opts="tier_servers=$TIER,tier_key=$KEY,tier_timeout=1s"
	node_up 0 "$WORK/packed" "$opts"
	expect_eq "node A's reads" "$(wrong_reads "$WORK/mnt0" "$SRC")" "0 0"
	node_down 0
	counts=$(python3 "$ADVERSARY" seal "${MC_PORTS[0]}" "$KEY" new)
	echo "key holder: $counts"
	n=$(json_sum "$counts" sealed_wrong)
	[ "$n" -eq "$(find "$SRC" -type f | wc -l)" ] || fail "the key holder sealed only $n values"
	node_up 1 "$WORK/packed" "$opts"
	expect_eq "node B: wrong and failed reads" "$(wrong_reads "$WORK/mnt1" "$SRC")" "0 0"
	expect_eq "node B: tier.corrupt" "$(MNT=$WORK/mnt1 stat_value tier.corrupt)" "$n"
	node_down 1
	node_up 1 "$WORK/packed"
	expect_eq "node B without the tier: wrong and failed reads" "$(wrong_reads "$WORK/mnt1" "$SRC")" "0 0"
	node_down 1
	check_log
	stop_memcached_all
}

# A control_uid= user keeps scores but may not steer the tier: the tier
# line is refused with its reason in last_error; the owner's is taken.
test_only_the_owner_steers_the_tier() {
	local line err
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; return 0; }
	NODES=1 start_tier
	line="tier 127.0.0.1:${MC_PORTS[0]}"
	chmod o+x "$WORK"
	node_up 0 "$SRC" "allow_other,control_uid=65534,tier_key=$KEY"
	if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
		"printf '%s\n0.5 train/n00000000/n00000000_1.JPEG\n' '$line' >'$WORK/mnt0/.control'" 2>/dev/null; then
		fail "control_uid's tier line was taken"
	fi
	MNT=$WORK/mnt0
	err=$(stat_value last_error)
	grep -q "only the mount's owner or root may change the tier" <<<"$err" ||
		fail "last_error does not say why: $err"
	expect_eq "control_uid's score line" "$(stat_value scored_samples)" 1
	grep -q '"tier"' "$MNT/.stats" && fail "control_uid attached a tier"
	expect_eq "the owner's tier line" "$(control "$line"$'\n')" ok
	grep -q '"servers": 1' "$MNT/.stats" || fail "the owner's tier line did not attach the tier"
	if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 'tier off' >'$MNT/.control'" 2>/dev/null; then
		fail "control_uid's tier off was taken"
	fi
	grep -q '"servers": 1' "$MNT/.stats" || fail "control_uid detached the tier"
	MNT=$WORK/mnt
	node_down 0
	ALLOWED_LOG="$ALLOWED_LOG|\\.control: line 1: only the mount's owner or root may change the tier"
	check_log
	ALLOWED_LOG='tier server .* (stopped answering|holds a bad value)'
	stop_memcached_all
}

# expect_refused WHAT PATTERN OPTIONS: a mount with OPTIONS fails with one
# line matching PATTERN.
expect_refused() {
	local out
	out=$("$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE,$3" 2>&1) && fail "$1 was accepted"
	grep -q -- "$2" <<<"$out" || fail "$1: unexpected message: $out"
	expect_eq "$1: lines" "$(wc -l <<<"$out")" 1
}

# tier_key= is refused unless it names a private file of 32 bytes or more,
# and a tier needs one; keygen never overwrites a key.
test_tier_key_is_required_and_private() {
	local out
	echo "127.0.0.1:11211" >"$WORK/one"
	expect_refused "tier_servers= without tier_key=" \
		"tier_servers= needs tier_key=FILE.*make one with dlcache keygen FILE" "tier_servers=$WORK/one"
	expect_refused "a missing tier_key" \
		"cannot read the tier_key file $WORK/none (No such file or directory); make one with dlcache keygen" \
		"tier_servers=$WORK/one,tier_key=$WORK/none"
	head -c 31 /dev/urandom >"$WORK/short"
	chmod 600 "$WORK/short"
	expect_refused "a short tier_key" "holds 31 bytes, not 32 to 4096; make one with dlcache keygen FILE" \
		"tier_key=$WORK/short"
	head -c 32 /dev/urandom >"$WORK/open"
	chmod 644 "$WORK/open"
	expect_refused "a tier_key readable by others" "is open to its group or others (mode 0644); chmod 600 $WORK/open" \
		"tier_key=$WORK/open"
	chmod 640 "$WORK/open"
	expect_refused "a tier_key readable by its group" "(mode 0640); chmod 600" "tier_key=$WORK/open"
	# keygen: a new key, never over one.
	cp "$KEY" "$WORK/key.before"
	out=$("$DLCACHE" keygen "$KEY" 2>&1) && fail "keygen overwrote a key"
	grep -q "exists; keygen never overwrites a key" <<<"$out" || fail "unexpected message: $out"
	cmp -s "$KEY" "$WORK/key.before" || fail "keygen changed the existing key"
	"$DLCACHE" keygen "$WORK/new.key" >/dev/null
	expect_eq "a new key's mode and size" "$(stat -c '%a %s' "$WORK/new.key")" "600 32"
	# A tier line on a mount without a key says how to make one.
	start_daemon
	expect_eq "a tier line without tier_key" "$(control $'tier 127.0.0.1:11211\n')" EINVAL
	out=$(stat_value last_error)
	grep -q "a tier needs tier_key=FILE.*dlcache keygen FILE" <<<"$out" || fail "last_error: $out"
	grep -q '"tier"' "$MNT/.stats" && fail "a mount without a key attached a tier"
	ALLOWED_LOG="\\.control: line 1: a tier needs tier_key=FILE"
	stop_daemon
	ALLOWED_LOG='tier server .* (stopped answering|holds a bad value)'
}

# Under the sanitizers (tests/sanitize.sh) the fill test is left to the main
# build: it measures how full memcached's slabs get, which ASan does not
# change, and it is 10 s of CI.
[ -z "${DLC_SANITIZE:-}" ] || unset -f test_recommended_options_fill_the_server

run_tests
