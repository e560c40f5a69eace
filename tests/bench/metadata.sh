#!/usr/bin/env bash
# tests/bench/metadata.sh [ENTRIES] - metadata at ImageNet scale, side by side
# with the native directory: snapshot build vs find, mount time, daemon RSS
# and index bytes per entry, and a full walk (find + stat) native vs mounted.
# Needs root and /dev/fuse; builds the tree once in $BENCH_DIR (default
# /var/tmp/dlcache-bench-meta-ENTRIES) and reuses it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ENTRIES=${1:-1000000}
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
per = max(1, n // 1000)
for i in range(n):
    c = i // per
    d = os.path.join(root, "train", "n%08d" % c)
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    os.close(os.open(os.path.join(d, "n%08d_%d.JPEG" % (c, i)), os.O_CREAT | os.O_WRONLY, 0o644))
PY
	touch "$BENCH_DIR/complete"
fi

now() { date +%s.%N; }
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('%.2f' % (a / b))" "$1" "$2"; }

sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(now); find "$SRC" -printf '%s\n' | wc -l >/dev/null; t1=$(now)
find_cold=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); find "$SRC" -printf '%s\n' | wc -l >/dev/null; t1=$(now)
find_warm=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); "$DLCACHE" snapshot "$SRC" -o "$WORK/snap.db" >/dev/null; t1=$(now)
snap=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")

t0=$(now)
"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$WORK/cache,snapshot=$WORK/snap.db,log_level=warning" &
PID=$!
until [ -e "$MNT/.stats" ]; do sleep 0.01; done
t1=$(now)
mount_s=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
rss_mount=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)

sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(now); find "$SRC" -type f | wc -l >/dev/null; find "$SRC" -type f -print0 | xargs -0 stat >/dev/null; t1=$(now)
native_walk=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); find "$MNT" -type f | wc -l >/dev/null; find "$MNT" -type f -print0 | xargs -0 stat >/dev/null; t1=$(now)
mnt_walk1=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); find "$MNT" -type f | wc -l >/dev/null; find "$MNT" -type f -print0 | xargs -0 stat >/dev/null; t1=$(now)
mnt_walk2=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
t0=$(now); find "$SRC" -type f | wc -l >/dev/null; find "$SRC" -type f -print0 | xargs -0 stat >/dev/null; t1=$(now)
native_walk2=$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")
rss_walk=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
entries=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"]["entries"])' "$MNT/.stats")
index=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"]["index_memory"])' "$MNT/.stats")
meta=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote_ops"]["metadata"])' "$MNT/.stats")

cat <<TXT
entries                         $entries
snapshot build                  ${snap}s   (find -printf cold ${find_cold}s, warm ${find_warm}s; ratio to cold $(ratio "$snap" "$find_cold"), to warm $(ratio "$snap" "$find_warm"))
mount with a ready snapshot     ${mount_s}s
index memory                    $index bytes = $((index / entries)) B/entry
daemon RSS after mount          $((rss_mount / 1024)) MiB = $((rss_mount * 1024 / entries)) B/entry
daemon RSS after full walk      $((rss_walk / 1024)) MiB = $((rss_walk * 1024 / entries)) B/entry
walk (find + stat every file)   native cold ${native_walk}s, mounted first ${mnt_walk1}s (ratio $(ratio "$mnt_walk1" "$native_walk")); native warm ${native_walk2}s, mounted second ${mnt_walk2}s (ratio $(ratio "$mnt_walk2" "$native_walk2"))
remote metadata calls after mount $meta
TXT
