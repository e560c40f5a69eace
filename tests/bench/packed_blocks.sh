#!/usr/bin/env bash
# tests/bench/packed_blocks.sh - a shard larger than cache_max_file read
# through the three kinds of source that hold it, over the emulated link
# (source_delay=10ms per call, source_bw=200M shared by every call):
#   tree     the shard as a file of the source tree
#   packed   the same tree after dlcache pack (the shard a member of a chunk)
#   tar      a tar of the tree indexed in place with dlcache snapshot --tar --merge
# For each: the first pass (fresh cache, the source files warmed in the page
# cache so that the link limits it), then the cached pass after a remount
# with the page cache dropped, and the source reads of that pass.  Packed
# and tar figures are printed as ratios of the tree's, measured in the same
# run.  BASELINE=/path/to/older/dlcache adds the packed source under it
# (before issue 16's one read interface: a packed large member was read by
# range from its chunk, uncached, so its second pass went to the source).
# SHARD_MB (default 256) MiB, built once under $BENCH_DIR; RUNS (default 2)
# runs per figure, the best printed.  Needs root and /dev/fuse.
. "$(dirname "$0")/lib.sh"
SHARD_MB=${SHARD_MB:-256}
DELAY=${DELAY:-10ms}
BW=${BW:-200M}
RUNS=${RUNS:-2}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-packed-blocks-$SHARD_MB}
SLOW="source_delay=$DELAY,source_bw=$BW,cache_size=100G"
SHARD_BYTES=$((SHARD_MB << 20))

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating a shard of $SHARD_MB MiB, its pack and its tar under $BENCH_DIR ..."
	rm -rf "$BENCH_DIR"
	mkdir -p "$BENCH_DIR/tree/big" "$BENCH_DIR/tars"
	head -c "$SHARD_BYTES" /dev/urandom >"$BENCH_DIR/tree/big/s0.tfrecord"
	"$DLCACHE" pack "$BENCH_DIR/tree" "$BENCH_DIR/packed" >/dev/null
	tar -cf "$BENCH_DIR/tars/shard-000000.tar" -C "$BENCH_DIR/tree" big
	"$DLCACHE" snapshot --tar "$BENCH_DIR/tars" --merge >/dev/null
	touch "$BENCH_DIR/complete"
fi

seconds_of() {  # seconds_of FILE: reads it once
	printf '%s\n' "$1" >"$WORK/list"
	python3 tests/bench/reader.py "$WORK/list" 1 | cut -d' ' -f1
}
min_of() { printf '%s\n' "$@" | sort -g | head -n 1; }
max_of() { printf '%s\n' "$@" | sort -g | tail -n 1; }
mibs() { awk "BEGIN {printf \"%.0f\", $SHARD_BYTES / $1 / 1048576}"; }

# measure SOURCE_DIR WARM_FILE: sets FIRST, CACHED (best seconds) and READS
# (the most source reads of a cached pass).
measure() {
	local firsts=() cacheds=() reads=() run before
	for run in $(seq 1 "$RUNS"); do
		rm -rf "$WORK/cache"
		cat "$2" >/dev/null
		mount_dlcache "$1" "$SLOW"
		firsts+=("$(seconds_of "$MNT/big/s0.tfrecord")")
		unmount_dlcache
		mount_dlcache "$1" "$SLOW"
		drop_caches
		before=$(stat_of remote_ops.read)
		cacheds+=("$(seconds_of "$MNT/big/s0.tfrecord")")
		reads+=($(($(stat_of remote_ops.read) - before)))
		unmount_dlcache
	done
	FIRST=$(min_of "${firsts[@]}") CACHED=$(min_of "${cacheds[@]}") READS=$(max_of "${reads[@]}")
}

echo "a $SHARD_MB MiB shard over $DELAY per call and $BW shared, cache_max_file=64M, block_size=4M; best of $RUNS"
printf '%-28s %12s %12s %14s\n' source "first MiB/s" "cached MiB/s" "cached reads"
measure "$BENCH_DIR/tree" "$BENCH_DIR/tree/big/s0.tfrecord"
tf=$FIRST tc=$CACHED
printf '%-28s %12s %12s %14s\n' tree "$(mibs "$tf")" "$(mibs "$tc")" "$READS"
for kind in packed tars; do
	measure "$BENCH_DIR/$kind" "$(find "$BENCH_DIR/$kind" -name '*.tar' | head -n 1)"
	printf '%-28s %12s %12s %14s   first %.2fx, cached %.2fx the tree\n' "$kind" "$(mibs "$FIRST")" \
		"$(mibs "$CACHED")" "$READS" "$(awk "BEGIN {print $tf / $FIRST}")" "$(awk "BEGIN {print $tc / $CACHED}")"
done
if [ -n "${BASELINE:-}" ]; then
	DLCACHE=$BASELINE measure "$BENCH_DIR/packed" "$(find "$BENCH_DIR/packed" -name '*.tar' | head -n 1)"
	printf '%-28s %12s %12s %14s   first %.2fx, cached %.2fx the tree\n' "packed, baseline" "$(mibs "$FIRST")" \
		"$(mibs "$CACHED")" "$READS" "$(awk "BEGIN {print $tf / $FIRST}")" "$(awk "BEGIN {print $tc / $CACHED}")"
fi
