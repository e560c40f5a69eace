#!/usr/bin/env bash
# tests/bench/cold_hits.sh [FILES] - where a cold cache hit's time goes.
#
# Fills a cache with FILES files of ~110 KB (default 4000, the tree of
# tests/bench/read.sh), remounts and reads them once (each checked), then,
# page cache dropped before each pass, reads them one after the other,
# natively (the cache's own files) and through the mount, ROUNDS times
# (default 3), and prints the microseconds per file spent in open, read
# and close (tests/bench/phases.py): what the mount adds, step by step.
# With perf and the kernel's FUSE tracepoints, the last pass through the
# mount is also recorded and each FUSE request's round trip printed
# (tests/bench/fuse_latency.py).  OPTS adds mount options (io_uring=1 sets
# the kernel's switch for the run and puts it back).  DROP=1 drops the page
# cache only, keeping dentries and inodes (no LOOKUP per file); the default,
# 3, drops them too.  Needs root.
. "$(dirname "$0")/lib.sh"
FILES=${1:-4000}
ROUNDS=${ROUNDS:-3}
READERS=${READERS:-1}
OPTS=${OPTS:-}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
data_tree "$BENCH_DIR" "$FILES"
SRC=$BENCH_DIR/src
uring_switch_for "$OPTS"

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"
mount_dlcache "$SRC" "cache_size=100G"
python3 tests/bench/reader.py "$WORK/mounted" 4 >/dev/null
unmount_dlcache
cache_files_in_order "$WORK/cache" "$WORK/order" >"$WORK/native"

mount_dlcache "$SRC" "cache_size=100G${OPTS:+,$OPTS}"
python3 tests/bench/reader.py "$WORK/mounted" 4 >/dev/null      # first hits: checked
tracing=
if command -v perf >/dev/null && { [ -d /sys/kernel/tracing/events/fuse ] ||
	{ mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && [ -d /sys/kernel/tracing/events/fuse ]; }; }; then
	tracing=1
fi
echo "cold hits, $READERS reader(s), $FILES files, $ROUNDS passes each (us per file); mount options: ${OPTS:-none}; drop_caches=${DROP:-3}"
for round in $(seq "$ROUNDS"); do
	drop_caches
	echo "  native: $(python3 tests/bench/phases.py "$WORK/native" "$READERS")"
	drop_caches
	if [ -n "$tracing" ] && [ "$round" = "$ROUNDS" ]; then
		echo "  mount:  $(perf record -q -o "$WORK/perf.data" -e fuse:fuse_request_send \
			-e fuse:fuse_request_end -a -- python3 tests/bench/phases.py "$WORK/mounted" "$READERS" 2>/dev/null)"
	else
		echo "  mount:  $(python3 tests/bench/phases.py "$WORK/mounted" "$READERS")"
	fi
done
echo "  passthrough hits: $(stat_of hits_passthrough)"
unmount_dlcache
if [ -n "$tracing" ]; then
	echo "FUSE requests of the last pass through the mount:"
	perf script -i "$WORK/perf.data" 2>/dev/null | python3 tests/bench/fuse_latency.py
else
	echo "(no perf or no FUSE tracepoints: request times not shown)"
fi
