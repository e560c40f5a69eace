#!/bin/bash
# tier.sh - the cluster tier on one machine, beside local-only caches, in one
# run: three memcached on loopback ports (started here, stopped by PID),
# three mounts of one dataset over a slow source (source_delay), epochs split
# perm[k::3] with a new permutation each epoch (tests/mount/tier_epochs.py).
#
#   A. local caches 0.4x each, memcached 0.4x each: source opens from epoch 2
#      as a share of reads, and epoch times, tier vs local-only.
#   B. local caches and memcached 0.267x each (aggregate 0.8x): hit ratio
#      from epoch 2 (local + tier hits over reads), tier vs local-only.
#   C. a hung peer (SIGSTOP mid-epoch): the longest read, against
#      tier_timeout plus the longest source read of a cold epoch.
#   D. local hits (cache holding everything) with the tier configured and
#      without: two mounts up side by side, epochs alternated for D_ROUNDS
#      rounds (default 10): the minima and the median of the rounds' ratios.
#   E. tier hits with 8 readers (one mount caching nothing locally): MB/s,
#      beside the same readers on local hits the daemon serves itself.  With
#      BASE_DLCACHE=BINARY (a build from before sealed values, which takes
#      no tier_key), its tier hits too, unsealed, in E_ROUNDS rounds
#      alternated with the sealed ones (memcached emptied before each), and
#      the ratio of the best passes: what sealing costs a tier hit.
#
# D and E check every read against the source's length and CRC-32, computed
# before their first epoch (tier_epochs.py --source-crc): a cold read of the
# source file beside each read would cost as much as the read measured.
#
# memcached runs with MC_OPTS, by default the options the README recommends
# (values chained in 2 KiB chunks of one slab class: it fills ~93% of -m,
# against ~83% with its defaults); MC_OPTS="" measures memcached's defaults.
# PARTS picks the parts to run (default "A B C D E").
#
# Every tier mount shares one tier_key, made here with dlcache keygen.
#
# Usage: [MC_OPTS=...] [PARTS="A B"] [BASE_DLCACHE=...] tests/bench/tier.sh [FILES] [RUNS]
#        (default 1200 files of ~110 KB, 3 runs)
. "$(dirname "$0")/lib.sh"
FILES=${1:-1200}
RUNS=${2:-3}
MC_OPTS=${MC_OPTS-"-o slab_chunk_max=2048 -f 8"}
PARTS=${PARTS:-A B C D E}
part() { [[ " $PARTS " == *" $1 "* ]]; }
DELAY=${DELAY:-5ms}
DATA=/var/tmp/dlcache-bench-tier-$FILES
EPOCHS=tests/mount/tier_epochs.py
data_tree "$DATA" "$FILES"
SRC=$DATA/src
BYTES=$(du -sb "$SRC" | awk '{print $1}')
MC_PIDS=()
MC_PORTS=()
NODE_PIDS=()
KEY=$WORK/tier.key
"$DLCACHE" keygen "$KEY" >/dev/null
stop_all() {
	for k in 0 1 2; do mountpoint -q "$WORK/m$k" 2>/dev/null && fusermount3 -u "$WORK/m$k"; done
	for p in "${NODE_PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
	NODE_PIDS=()
	for p in "${MC_PIDS[@]:-}"; do [ -n "$p" ] && { kill -CONT "$p"; kill "$p"; wait "$p"; } 2>/dev/null; done
	MC_PIDS=()
	return 0
}
trap 'stop_all; cleanup' EXIT

# memcached_start MB: three memcached of MB MiB each, -M; the list in $WORK/tier.
memcached_start() {
	: >"$WORK/tier"
	for i in 0 1 2; do
		MC_PORTS[$i]=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		# shellcheck disable=SC2086  # MC_OPTS is a list of options
		memcached -u root -l 127.0.0.1 -p "${MC_PORTS[$i]}" -U 0 -m "$1" -M -t 2 -c 4096 $MC_OPTS &
		MC_PIDS[$i]=$!
		echo "127.0.0.1:${MC_PORTS[$i]}" >>"$WORK/tier"
	done
	sleep 0.5
}

# nodes_start N CACHE_SIZE [OPTIONS]: N mounts m0.. with fresh caches.
nodes_start() {
	for k in $(seq 0 $(($1 - 1))); do
		mkdir -p "$WORK/m$k"
		rm -rf "$WORK/c$k"
		"$DLCACHE" mount "$SRC" "$WORK/m$k" -f -o "cache_dir=$WORK/c$k,cache_size=$2,policy=freeze,log_level=error,source_delay=$DELAY${3:+,$3}" &
		NODE_PIDS[$k]=$!
	done
	for k in $(seq 0 $(($1 - 1))); do until [ -e "$WORK/m$k/.stats" ]; do sleep 0.05; done; done
}

# epochs ARGS: the JSON lines of tier_epochs.py on the mounts m0..m2.
run_epochs() {
	python3 "$EPOCHS" "$SRC" "$WORK"/m? "$@"
}

summary() {   # summary FILE: per epoch: seconds, source opens/reads, hit ratio
	python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    hit = (e["local_hits"] + e["tier_hits"]) / e["reads"]
    print("  epoch %d: %6.2f s  source opens %4d / %d reads (%5.1f%%)  hit %.3f (local %.3f, tier %.3f)  longest read %.3f s  wrong %d failed %d" % (
        e["epoch"] + 1, e["seconds"], e["source_opens"], e["reads"], 100.0 * e["source_opens"] / e["reads"],
        hit, e["local_hits"] / e["reads"], e["tier_hits"] / e["reads"], e["max_read_seconds"], e["wrong"], e["failed"]))
PY
}

echo "dataset: $FILES files, $((BYTES >> 20)) MiB; source_delay=$DELAY; $(nproc) cores (shared: expect noise)"
echo "memcached options: -M -t 2 -c 4096 ${MC_OPTS:-(its defaults)}"

if part A; then
echo "== A. caches 0.4x per node, memcached 0.4x per node (3 nodes)"
MB=$(( BYTES * 4 / 10 / 1048576 + 1 ))
memcached_start "$MB"
nodes_start 3 $((BYTES * 4 / 10)) "tier_servers=$WORK/tier,tier_key=$KEY"
run_epochs --epochs 3 --seed 11 >"$WORK/a_tier"
stop_all
nodes_start 3 $((BYTES * 4 / 10))
run_epochs --epochs 3 --seed 11 >"$WORK/a_local"
stop_all
echo " with the tier:"; summary "$WORK/a_tier"
echo " local-only:"; summary "$WORK/a_local"
fi

if part B; then
echo "== B. aggregate 0.8x: caches and memcached 0.267x per node"
MB=$(( BYTES * 8 / 30 / 1048576 ))
memcached_start "$MB"
nodes_start 3 $((BYTES * 8 / 30)) "tier_servers=$WORK/tier,tier_key=$KEY"
run_epochs --epochs 3 --seed 12 >"$WORK/b_tier"
echo " memcached after B (evictions must be 0):"
python3 -c 'import json, sys
for k, s in json.load(open(sys.argv[1]))["tier"].items():
    if isinstance(s, dict):
        print("   %s fill %d limit %d full %s evictions %d extstore_lost %d refusals %d" % (k, s["fill"], s["limit"], s["full"], s["evictions"], s["extstore_lost"], s["refusals"]))' "$WORK/m0/.stats"
stop_all
nodes_start 3 $((BYTES * 8 / 30))
run_epochs --epochs 3 --seed 12 >"$WORK/b_local"
stop_all
echo " with the tier:"; summary "$WORK/b_tier"
echo " local-only:"; summary "$WORK/b_local"
fi

if part C; then
echo "== C. a hung peer (SIGSTOP mid-epoch 2; tier_timeout=200ms)"
MB=$(( BYTES * 4 / 10 / 1048576 + 1 ))
memcached_start "$MB"
nodes_start 3 $((BYTES * 4 / 10)) "tier_servers=$WORK/tier,tier_key=$KEY"
run_epochs --epochs 2 --seed 13 --fault "stop:${MC_PIDS[0]}" --fault-epoch 1 >"$WORK/c_tier"
summary "$WORK/c_tier"
stop_all
fi

if part D; then
D_ROUNDS=${D_ROUNDS:-10}
echo "== D. local hits, tier configured vs not (cache holds everything; $D_ROUNDS rounds, alternated)"
memcached_start 64
# Two mounts of one dataset, each with its own cache holding everything:
# m0 without the tier, m1 with it, both up for the whole part (so the
# tier's own threads run beside m0's epochs as they would beside a job).
# Each round reads one epoch from each, in alternating order; the shorter
# the epochs the more the machine's noise shows, hence the rounds.
for k in 0 1; do
	opt=; [ $k = 1 ] && opt="tier_servers=$WORK/tier,tier_key=$KEY"
	rm -rf "$WORK/c$k"; mkdir -p "$WORK/m$k"
	"$DLCACHE" mount "$SRC" "$WORK/m$k" -f -o "cache_dir=$WORK/c$k,cache_size=$((BYTES * 2)),log_level=error${opt:+,$opt}" &
	NODE_PIDS[$k]=$!
done
for k in 0 1; do until [ -e "$WORK/m$k/.stats" ]; do sleep 0.05; done; done
for k in 0 1; do python3 "$EPOCHS" "$SRC" "$WORK/m$k" --epochs 1 --readers 4 >/dev/null; done
for r in $(seq "$D_ROUNDS"); do
	order="0 1"; [ $((r % 2)) = 0 ] && order="1 0"
	for k in $order; do
		python3 "$EPOCHS" "$SRC" "$WORK/m$k" --epochs 1 --readers 4 --seed $((20 + r)) \
			--source-crc >>"$WORK/d_$k"
	done
done
python3 - "$WORK/d_0" "$WORK/d_1" <<'PY'
import json, statistics, sys
runs = [[json.loads(l) for l in open(f)] for f in sys.argv[1:]]
secs = [[l["seconds"] for l in r] for r in runs]
pairs = [b / a for a, b in zip(*secs)]
print("  without the tier %.3f s, with %.3f s (min of %d); ratio with/without: of the minima %.3f, "
      "median of the rounds' ratios %.3f (spread %.3f-%.3f); local hits %d / %d, wrong %d" % (
          min(secs[0]), min(secs[1]), len(pairs), min(secs[1]) / min(secs[0]), statistics.median(pairs),
          min(pairs), max(pairs), sum(l["local_hits"] for l in runs[0]), sum(l["local_hits"] for l in runs[1]),
          sum(l["wrong"] for r in runs for l in r)))
PY
stop_all
fi

if part E; then
echo "== E. tier hits, 8 readers, one mount caching nothing locally"
echo "   (beside: the same readers on local hits the daemon serves itself, passthrough=0,"
echo "    the most a daemon-served read of these files can give on this machine; on local"
echo "    hits the kernel reads itself, passthrough; and on the source files, native: what"
echo "    these readers can take from this machine at all; page cache dropped every pass)"
[ "${#MC_PIDS[@]}" -gt 0 ] || memcached_start 64    # D's, or its own
# e_passes NAME OPTIONS: mounts m0 with OPTIONS (the binary $E_DLCACHE,
# default $DLCACHE), fills (one untimed pass), then RUNS timed passes of 8
# readers appended to $WORK/NAME, with the daemon's own CPU time (utime +
# stime, in clock ticks) over them added to $WORK/NAME.ticks: a figure of its
# work per GB that the load of a shared machine moves far less than the
# seconds.
e_passes() {
	local ticks
	mkdir -p "$WORK/m0"; rm -rf "$WORK/c0"
	"${E_DLCACHE:-$DLCACHE}" mount "$SRC" "$WORK/m0" -f -o "cache_dir=$WORK/c0,log_level=error,$2" &
	NODE_PIDS=($!)
	until [ -e "$WORK/m0/.stats" ]; do sleep 0.05; done
	python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs 1 --readers 8 >/dev/null
	local ticks0
	ticks0=$(awk '{print $14 + $15}' "/proc/${NODE_PIDS[0]}/stat")
	python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs "$RUNS" --readers 8 --seed 15 --source-crc >>"$WORK/$1"
	ticks=$(cat "$WORK/$1.ticks" 2>/dev/null || echo 0)
	echo $((ticks + $(awk '{print $14 + $15}' "/proc/${NODE_PIDS[0]}/stat") - ticks0)) >"$WORK/$1.ticks"
	fusermount3 -u "$WORK/m0"; wait "${NODE_PIDS[0]}"; NODE_PIDS=()
}
# flush_tier: empties the three memcached (text protocol's flush_all).
flush_tier() {
	python3 - "${MC_PORTS[@]}" <<'PY'
import socket, sys
for port in sys.argv[1:]:
    with socket.create_connection(("127.0.0.1", int(port)), 5) as s:
        s.sendall(b"flush_all\r\n")
        assert s.recv(64).startswith(b"OK")
PY
}
if [ -n "${BASE_DLCACHE:-}" ]; then
	# Sealed and unsealed values share keys: each round starts empty.
	for _ in $(seq "${E_ROUNDS:-3}"); do
		flush_tier
		E_DLCACHE=$BASE_DLCACHE e_passes e_base "policy=none,tier_servers=$WORK/tier"
		flush_tier
		e_passes e "policy=none,tier_servers=$WORK/tier,tier_key=$KEY"
	done
else
	e_passes e "policy=none,tier_servers=$WORK/tier,tier_key=$KEY"   # the first pass fills memcached
fi
e_passes e_local "cache_size=$((BYTES * 2)),passthrough=0"  # the first pass fills the cache
e_passes e_pass "cache_size=$((BYTES * 2)),passthrough=1"
python3 "$EPOCHS" "$SRC" "$SRC" --plain --epochs "$RUNS" --readers 8 --seed 15 --source-crc >"$WORK/e_native"
echo 0 >"$WORK/e_native.ticks"
python3 - "$WORK" "$BYTES" "$(getconf CLK_TCK)" <<'PY'
import json, sys
work, size, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mbs, cpus = {}, {}
import os
for name, what, hits in (("e", "tier hits", "tier_hits"), ("e_base", "tier hits, unsealed (base)", "tier_hits"),
                         ("e_local", "local hits, daemon-served", "local_hits"),
                         ("e_pass", "local hits, passthrough", "local_hits"), ("e_native", "native", "local_hits")):
    if not os.path.exists("%s/%s" % (work, name)):
        continue
    lines = [json.loads(l) for l in open("%s/%s" % (work, name))]
    best = min(l["seconds"] for l in lines)
    mbs[name] = size / best / 1e6
    cpu = int(open("%s/%s.ticks" % (work, name)).read()) / tck
    gb = size * len(lines) / 1e9
    cpus[name] = cpu / gb
    print("  %-26s %d reads, hits %s, wrong %d, failed %d; best %.3f s: %.0f MB/s; daemon CPU %.2f s/GB" % (
        what + ":", lines[0]["reads"], [l[hits] for l in lines], sum(l["wrong"] for l in lines),
        sum(l["failed"] for l in lines), best, mbs[name], cpu / gb))
print("  tier hits / daemon-served local hits: %.2f, / passthrough local hits: %.2f, / native: %.2f"
      % (mbs["e"] / mbs["e_local"], mbs["e"] / mbs["e_pass"], mbs["e"] / mbs["e_native"]))
if "e_base" in mbs:
    print("  sealed tier hits / unsealed (base binary): MB/s of the best passes %.3f, daemon CPU per GB %.3f"
          % (mbs["e"] / mbs["e_base"], cpus["e"] / cpus["e_base"]))
print("  (every read checked against the source's length and CRC-32)")
PY
stop_all
fi
