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
#      without: epoch time, minimum of RUNS runs each.
#   E. tier hits with 8 readers (one mount caching nothing locally): MB/s.
#
# memcached runs with MC_OPTS, by default the options the README recommends
# (values chained in 2 KiB chunks of one slab class: it fills ~93% of -m,
# against ~83% with its defaults); MC_OPTS="" measures memcached's defaults.
# PARTS picks the parts to run (default "A B C D E").
#
# Usage: [MC_OPTS=...] [PARTS="A B"] tests/bench/tier.sh [FILES] [RUNS]
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
nodes_start 3 $((BYTES * 4 / 10)) "tier_servers=$WORK/tier"
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
nodes_start 3 $((BYTES * 8 / 30)) "tier_servers=$WORK/tier"
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
nodes_start 3 $((BYTES * 4 / 10)) "tier_servers=$WORK/tier"
run_epochs --epochs 2 --seed 13 --fault "stop:${MC_PIDS[0]}" --fault-epoch 1 >"$WORK/c_tier"
summary "$WORK/c_tier"
stop_all
fi

if part D; then
echo "== D. local hits, tier configured vs not (cache holds everything; min of $RUNS)"
memcached_start 64
for mode in without with; do
	opt=; [ $mode = with ] && opt="tier_servers=$WORK/tier"
	rm -rf "$WORK/c0"; mkdir -p "$WORK/m0"
	"$DLCACHE" mount "$SRC" "$WORK/m0" -f -o "cache_dir=$WORK/c0,cache_size=$((BYTES * 2)),log_level=error${opt:+,$opt}" &
	NODE_PIDS=($!)
	until [ -e "$WORK/m0/.stats" ]; do sleep 0.05; done
	python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs 1 --readers 4 >/dev/null
	python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs "$RUNS" --readers 4 --seed 14 >"$WORK/d_$mode"
	fusermount3 -u "$WORK/m0"; wait "${NODE_PIDS[0]}"; NODE_PIDS=()
done
python3 - "$WORK/d_without" "$WORK/d_with" <<'PY'
import json, sys
best = [min(json.loads(l)["seconds"] for l in open(f)) for f in sys.argv[1:]]
hits = [sum(json.loads(l)["local_hits"] for l in open(f)) for f in sys.argv[1:]]
print("  without the tier %.3f s, with %.3f s (min of runs); ratio with/without %.3f; local hits %d / %d" % (best[0], best[1], best[1] / best[0], hits[0], hits[1]))
PY
fi

if part E; then
echo "== E. tier hits, 8 readers, one mount caching nothing locally"
[ "${#MC_PIDS[@]}" -gt 0 ] || memcached_start 64    # D's, or its own
mkdir -p "$WORK/m0"; rm -rf "$WORK/c0"
"$DLCACHE" mount "$SRC" "$WORK/m0" -f -o "cache_dir=$WORK/c0,policy=none,log_level=error,tier_servers=$WORK/tier" &
NODE_PIDS=($!)
until [ -e "$WORK/m0/.stats" ]; do sleep 0.05; done
python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs 1 --readers 8 >/dev/null   # fills memcached from the source
# The daemon's own CPU time (utime + stime, in clock ticks) over the timed
# passes: a figure of its work per GB that the load of a shared machine
# moves far less than the seconds.
ticks0=$(awk '{print $14 + $15}' "/proc/${NODE_PIDS[0]}/stat")
python3 "$EPOCHS" "$SRC" "$WORK/m0" --epochs "$RUNS" --readers 8 --seed 15 >"$WORK/e"
ticks1=$(awk '{print $14 + $15}' "/proc/${NODE_PIDS[0]}/stat")
python3 - "$WORK/e" "$BYTES" "$((ticks1 - ticks0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
best = min(l["seconds"] for l in lines)
print("  %d reads, tier hits %s, best %.3f s: %.0f MB/s (reader threads also compare every byte with the source)" % (
    lines[0]["reads"], [l["tier_hits"] for l in lines], best, int(sys.argv[2]) / best / 1e6))
gb = int(sys.argv[2]) * len(lines) / 1e9
print("  the daemon's CPU: %.2f s for %.2f GB of tier hits, %.2f s/GB" % (
    int(sys.argv[3]) / int(sys.argv[4]), gb, int(sys.argv[3]) / int(sys.argv[4]) / gb))
PY
fusermount3 -u "$WORK/m0"; wait "${NODE_PIDS[0]}"; NODE_PIDS=()
stop_all
fi
