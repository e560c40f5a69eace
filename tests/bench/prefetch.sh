#!/usr/bin/env bash
# tests/bench/prefetch.sh [FILES] - one reader's first epoch over an emulated
# slow source (source_delay=2ms, source_bw=1G by default), without and with
# the epoch's order announced as "prefetch PATH" lines in .control; prints the
# speedup.  Uses the tree of tests/bench/read.sh (built if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
FILES=${1:-2000}
TREE=${TREE:-20000}
DELAY=${DELAY:-2ms}
BW=${BW:-1G}
DLCACHE=${DLCACHE:-$PWD/build/dlcache}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$TREE}
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
	rm -rf "$SRC"
	python3 examples/make_dataset.py "$SRC" --classes 100 --per-class $((TREE / 100)) >/dev/null
	touch "$BENCH_DIR/complete"
fi

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) -n "$FILES" >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/list"
sed "s|^|prefetch |" "$WORK/order" >"$WORK/announce"

epoch() {   # epoch yes|no -> seconds
	rm -rf "$WORK/cache"
	"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$WORK/cache,cache_size=100G,log_level=warning,source_delay=$DELAY,source_bw=$BW" &
	PID=$!
	until [ -e "$MNT/.stats" ]; do sleep 0.05; done
	sync; echo 3 >/proc/sys/vm/drop_caches
	local t0 t1
	t0=$(date +%s.%N)
	[ "$1" = yes ] && cat "$WORK/announce" >"$MNT/.control"
	python3 tests/bench/reader.py "$WORK/list" 1 >/dev/null
	t1=$(date +%s.%N)
	python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("   hits %d (prefetched %d), misses %d, prefetches %d, source opens %d" % (s["hits"], s["prefetch_hits"], s["misses"], s["prefetches"], s["remote_ops"]["open"]))' "$MNT/.stats" >&2
	fusermount3 -u "$MNT"
	wait "$PID"
	PID=
	awk "BEGIN {printf \"%.2f\", $t1 - $t0}"
}

echo "one reader, $FILES files, first epoch, source_delay=$DELAY source_bw=$BW"
plain=$(epoch no)
echo "  without prefetch: ${plain}s"
announced=$(epoch yes)
echo "  with the order announced (prefetch lines, default window): ${announced}s"
echo "  speedup: $(awk "BEGIN {printf \"%.1f\", $plain / $announced}")x"
