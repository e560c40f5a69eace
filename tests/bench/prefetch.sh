#!/usr/bin/env bash
# tests/bench/prefetch.sh [FILES] - one reader's first epoch over an emulated
# slow source (source_delay=2ms, source_bw=1G by default), without and with
# the epoch's order announced as "prefetch PATH" lines in .control; prints the
# speedup.  Uses the tree of tests/bench/read.sh (built if missing).
. "$(dirname "$0")/lib.sh"
FILES=${1:-2000}
TREE=${TREE:-20000}
DELAY=${DELAY:-2ms}
BW=${BW:-1G}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$TREE}
SRC=$BENCH_DIR/src
data_tree "$BENCH_DIR" "$TREE"

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) -n "$FILES" >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/list"
sed "s|^|prefetch |" "$WORK/order" >"$WORK/announce"

epoch() {   # epoch yes|no -> seconds
	rm -rf "$WORK/cache"
	mount_dlcache "$SRC" "cache_size=100G,source_delay=$DELAY,source_bw=$BW"
	drop_caches
	local t0 seconds
	t0=$(now)
	[ "$1" = yes ] && cat "$WORK/announce" >"$MNT/.control"
	python3 tests/bench/reader.py "$WORK/list" 1 >/dev/null
	seconds=$(since "$t0")
	python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("   hits %d (prefetched %d), misses %d, prefetches %d, source opens %d" % (s["hits"], s["prefetch_hits"], s["misses"], s["prefetches"], s["remote_ops"]["open"]))' "$MNT/.stats" >&2
	unmount_dlcache
	echo "$seconds"
}

echo "one reader, $FILES files, first epoch, source_delay=$DELAY source_bw=$BW"
plain=$(epoch no)
echo "  without prefetch: ${plain}s"
announced=$(epoch yes)
echo "  with the order announced (prefetch lines, default window): ${announced}s"
echo "  speedup: $(ratio "$plain" "$announced")x"
