#!/usr/bin/env bash
# tests/bench/epoch_stall.sh [ENTRIES] - the longest open while the job writes
# "epoch N" lines (issue 14 item 8).  Each epoch line saves the whole score
# table (ENTRIES scores, default 1,281,167: ImageNet) to cache_dir; a save
# that holds the cache lock makes every open in the mount wait for the disk.
#
# One mount of ENTRIES empty files, every file ranked once; a reader opens
# and reads files of a 2,000-file working set in a loop (hits after the first
# pass) for PHASE seconds without epoch lines, then PHASE seconds while an
# "epoch N" line is written every second.  Printed: open latency p50 / p99 /
# max in both phases.  THROTTLE=BYTES_PER_S puts the daemon in a blkio
# cgroup (v1) whose writes to the cache's disk are throttled to that rate,
# so that each save of the table takes seconds, as on a node whose SSD is
# saturated, deterministically.  BUSY_DISK=1 keeps another writer (dd with fsync) on
# the cache's disk during the epoch phase, as cache fills and checkpoints do
# on a training node, so that each save's fsync is slow.  Set BASELINE=path/to/older/dlcache to run an older
# binary the same way in the same run (e.g. a build of f202df4^, before the
# save moved out of the lock) and print the ratio of the maxima.
. "$(dirname "$0")/lib.sh"
ENTRIES=${1:-1281167}
PHASE=${PHASE:-8}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-meta-$ENTRIES}
SRC=$BENCH_DIR/src
empty_tree "$BENCH_DIR" "$ENTRIES"

(cd "$SRC" && find train -type f) | python3 -c '
import random, sys
paths = sys.stdin.read().split()
random.seed(1)
random.shuffle(paths)
open(sys.argv[1], "w").write("".join("%.6f %s\n" % (random.random(), p) for p in paths))
open(sys.argv[2], "w").write("\n".join(paths[:2000]) + "\n")' "$WORK/ranks.txt" "$WORK/working.txt"

# reader.py MNT LIST SECONDS: opens and reads LIST's files in a loop; prints
# "p50 p99 max" open+read latencies in milliseconds.
cat >"$WORK/reader.py" <<'PY'
import os, sys, time
mnt, paths, seconds = sys.argv[1], open(sys.argv[2]).read().split(), float(sys.argv[3])
lat, end, i = [], time.monotonic() + seconds, 0
while time.monotonic() < end:
    t = time.monotonic()
    fd = os.open(os.path.join(mnt, paths[i % len(paths)]), os.O_RDONLY)
    os.read(fd, 65536)
    os.close(fd)
    lat.append(time.monotonic() - t)
    i += 1
lat.sort()
print("%.2f %.2f %.2f" % (lat[len(lat) // 2] * 1e3, lat[len(lat) * 99 // 100] * 1e3, lat[-1] * 1e3))
PY

# throttle PID: the daemon's writes to the cache's disk limited to $THROTTLE
# bytes/s (blkio.throttle.write_bps_device), the cgroup removed at exit.
CGROUP=/sys/fs/cgroup/blkio/dlcache-bench-$$
throttle() {
	[ -n "${THROTTLE:-}" ] || return 0
	mkdir -p "$CGROUP"
	echo "$(findmnt -no MAJ:MIN -T "$WORK" | tr -d ' ') $THROTTLE" >"$CGROUP/blkio.throttle.write_bps_device"
	echo "$1" >"$CGROUP/cgroup.procs"
}
uncgroup() {
	[ -d "$CGROUP" ] && rmdir "$CGROUP" 2>/dev/null
	return 0
}
trap 'cleanup; uncgroup' EXIT

# run BINARY: prints "quiet_p50 quiet_p99 quiet_max epoch_p50 epoch_p99 epoch_max".
run() {
	local bin=$1 quiet epoch writer
	DLCACHE=$bin mount_dlcache "$SRC"
	cat "$WORK/ranks.txt" >"$MNT/.control"
	throttle "$PID"
	python3 "$WORK/reader.py" "$MNT" "$WORK/working.txt" 2 >/dev/null   # warm: the working set cached
	quiet=$(python3 "$WORK/reader.py" "$MNT" "$WORK/working.txt" "$PHASE")
	(for n in $(seq 1 "$PHASE"); do
		t=$(now); echo "epoch $n" >"$MNT/.control"; echo "$(since "$t")" >>"$WORK/saves"
		sleep 1
	done) &
	writer=$!
	if [ -n "${BUSY_DISK:-}" ]; then
		# The node's SSD busy with other writes (cache fills, checkpoints):
		# every fsync on it waits behind them.
		(while :; do dd if=/dev/zero of="$WORK/busy" bs=1M count=512 conv=fsync status=none; done) &
		busy=$!
	fi
	epoch=$(python3 "$WORK/reader.py" "$MNT" "$WORK/working.txt" "$PHASE")
	wait "$writer"
	if [ -n "${BUSY_DISK:-}" ]; then
		kill "$busy"
		wait "$busy" 2>/dev/null || true
		rm -f "$WORK/busy"
	fi
	unmount_dlcache
	rm -rf "$WORK/cache"
	echo "$quiet $epoch $(sort -n "$WORK/saves" | tail -1)"
	rm -f "$WORK/saves"
}


echo "entries $ENTRIES, phases of ${PHASE}s, an epoch line every second in the second"
new=$(run "$DLCACHE")
set -- $new
printf 'dlcache   quiet p50 %s ms, p99 %s ms, max %s ms | epoch lines p50 %s ms, p99 %s ms, max %s ms | longest epoch line %s s\n' "$@"
if [ -n "${BASELINE:-}" ]; then
	old=$(run "$BASELINE")
	set -- $old
	printf 'baseline  quiet p50 %s ms, p99 %s ms, max %s ms | epoch lines p50 %s ms, p99 %s ms, max %s ms | longest epoch line %s s\n' "$@"
	echo "max open during epoch lines, dlcache / baseline: $(ratio "$(echo "$new" | cut -d' ' -f6)" "$6")"
fi
