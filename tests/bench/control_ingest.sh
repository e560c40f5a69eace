#!/usr/bin/env bash
# tests/bench/control_ingest.sh [ENTRIES] - how fast a mount takes a full
# epoch of loss ranks: ENTRIES "SCORE PATH" lines (default 1,281,167, one per
# ImageNet training image) written to MOUNT/.control by cat, side by side
# with the same bytes written to /dev/null.  Needs root and /dev/fuse; the
# tree of empty files is built once in $BENCH_DIR and reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
ENTRIES=${1:-1281167}
DLCACHE=${DLCACHE:-$PWD/build/dlcache}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-meta-$ENTRIES}
SRC=$BENCH_DIR/src
WORK=$(mktemp -d /tmp/dlcache-bench.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
PID=
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating $ENTRIES empty files in 1000 class directories under $SRC ..."
	rm -rf "$SRC"
	python3 - "$SRC" "$ENTRIES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = -(-n // 1000)
for i in range(n):
    c = i // per
    d = os.path.join(root, "train", "n%08d" % c)
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    os.close(os.open(os.path.join(d, "n%08d_%d.JPEG" % (c, i)), os.O_CREAT | os.O_WRONLY, 0o644))
PY
	touch "$BENCH_DIR/complete"
fi

# One rank line per file, in a random order, as a job would write after an epoch.
(cd "$SRC" && find train -type f) | python3 -c '
import random, sys
paths = sys.stdin.read().split()
random.shuffle(paths)
sys.stdout.write("".join("%.6f %s\n" % (random.random(), p) for p in paths))' >"$WORK/ranks.txt"
lines=$(wc -l <"$WORK/ranks.txt")
bytes=$(stat -c %s "$WORK/ranks.txt")

"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$WORK/cache,log_level=warning" &
PID=$!
until [ -e "$MNT/.stats" ]; do sleep 0.05; done

now() { date +%s.%N; }
cat "$WORK/ranks.txt" >/dev/null
t0=$(now); cat "$WORK/ranks.txt" >/dev/null; t1=$(now)
null_s=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); cat "$WORK/ranks.txt" >"$MNT/.control"; t1=$(now)
mount_s=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
[ -n "${PERF:-}" ] && perf record -g -o /tmp/ingest.perf -p $PID &
[ -n "${PERF:-}" ] && { PERFPID=$!; sleep 1; }
t0=$(now); dd if="$WORK/ranks.txt" of="$MNT/.control" bs=1M status=none; t1=$(now)
dd_s=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
scored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["scored_samples"])' "$MNT/.stats")
errors=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["control_errors"])' "$MNT/.stats")

cat <<TXT
lines                          $lines ($((bytes / 1048576)) MiB)
cat ranks > MNT/.control       ${mount_s}s = $(awk "BEGIN {printf \"%.2f\", $lines / $mount_s / 1e6}") M lines/s
dd bs=1M ranks > MNT/.control  ${dd_s}s = $(awk "BEGIN {printf \"%.2f\", $lines / $dd_s / 1e6}") M lines/s
cat ranks > /dev/null          ${null_s}s
scored samples                 $scored (errors $errors)
TXT
