#!/usr/bin/env bash
# tests/bench/blocks.sh - large files (shards) read by blocks, against the
# emulated link (source_delay=10ms per call, source_bw=200M shared by every
# call) and against native reads of the same files:
#   first pass     one shard streamed cold: MB/s / link rate, source bytes / file
#   first byte     open + read(1) of an uncached shard, ms
#   cached pass    the shard again after a remount, page cache dropped, vs a
#                  native cold read of the same file; source reads (must be 0)
#   four streams   four uncached shards at once: MB/s / link rate, daemon RSS growth
#   epochs         three shuffled epochs over 10 shards, cache of half: byte hit ratio
# Shards of SHARD_MB (default 1024) MiB, epoch shards of EPOCH_MB (default 256)
# MiB, built once under $BENCH_DIR.  Needs root and /dev/fuse.  RUNS (default
# 3) repeats the timed parts; the best run is printed (shared, noisy cores).
# ONLY_EPOCHS=1 runs the epochs alone.
# BASELINE=/path/to/older/dlcache adds its first pass and its cached pass,
# run the same way in the same run, for side-by-side ratios.
# The uncached parts read the source files from the page cache (warmed
# first), so that the emulated link, not the local disk, is what limits them.
. "$(dirname "$0")/lib.sh"
SHARD_MB=${SHARD_MB:-1024}
EPOCH_MB=${EPOCH_MB:-256}
DELAY=${DELAY:-10ms}
BW=${BW:-200M}
RUNS=${RUNS:-3}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-blocks-$SHARD_MB-$EPOCH_MB}
SRC=$BENCH_DIR/src
SLOW="source_delay=$DELAY,source_bw=$BW"

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating 4 shards of $SHARD_MB MiB and 10 of $EPOCH_MB MiB under $SRC ..."
	rm -rf "$SRC"
	mkdir -p "$SRC/big" "$SRC/epoch"
	for i in 0 1 2 3; do head -c $((SHARD_MB << 20)) /dev/urandom >"$SRC/big/s$i.tfrecord"; done
	for i in $(seq 0 9); do head -c $((EPOCH_MB << 20)) /dev/urandom >"$SRC/epoch/e$i.tfrecord"; done
	touch "$BENCH_DIR/complete"
fi
LINK=$(python3 -c '
import sys
t = sys.argv[1]
print(float(t.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(t[-1], 1))' "$BW")
SHARD_BYTES=$((SHARD_MB << 20))

seconds_of() {  # seconds_of FILE...: reads the files one after the other
	local list=$WORK/list
	printf '%s\n' "$@" >"$list"
	python3 tests/bench/reader.py "$list" 1 | cut -d' ' -f1
}
warm() { cat "$@" >/dev/null; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
best() { sort -g | head -n 1; }
min_of() { printf '%s\n' "$@" | sort -g | head -n 1; }

echo "blocks: block_size=4M readahead_max=64M, $SLOW (link $(awk "BEGIN {printf \"%.0f\", $LINK / 1048576}") MiB/s)"

if [ -z "${ONLY_EPOCHS:-}" ]; then
# The baseline first, with a cache of its own (another build may keep
# another format of cache, and would set this one's aside).
if [ -n "${BASELINE:-}" ]; then
	base_first=()
	for run in $(seq 1 "$RUNS"); do
		rm -rf "$WORK/cache-base"
		CACHE_DIR=$WORK/cache-base DLCACHE=$BASELINE mount_dlcache "$SRC" "cache_size=100G,$SLOW"
		warm "$SRC"/big/s0.tfrecord
		base_first+=("$(seconds_of "$MNT/big/s0.tfrecord")")
		unmount_dlcache
	done
	bf=$(min_of "${base_first[@]}")
	printf '%-44s %8.0f MiB/s  %.2fx link\n' "baseline first pass ($BASELINE)" \
		"$(awk "BEGIN {print $SHARD_BYTES / $bf / 1048576}")" "$(awk "BEGIN {print $SHARD_BYTES / $bf / $LINK}")"
fi

# First pass, first byte, source bytes: a fresh cache each run.
first=() fbyte=() srcratio=()
for run in $(seq 1 "$RUNS"); do
	rm -rf "$WORK/cache"
	mount_dlcache "$SRC" "cache_size=100G,$SLOW"
	warm "$SRC"/big/s[01].tfrecord
	fbyte+=("$(python3 -c '
import os, sys, time
t = time.monotonic(); fd = os.open(sys.argv[1], os.O_RDONLY); os.read(fd, 1); os.close(fd)
print("%.1f" % ((time.monotonic() - t) * 1000))' "$MNT/big/s1.tfrecord")")
	s=$(seconds_of "$MNT/big/s0.tfrecord")
	first+=("$s")
	remote=$(stat_of bytes_from_remote)
	# s1's first block (the first-byte read) is the only other source read.
	srcratio+=("$(awk "BEGIN {printf \"%.3f\", ($remote - 4194304) / $SHARD_BYTES}")")
	unmount_dlcache
done
fs=$(min_of "${first[@]}")
printf '%-44s %8.0f MiB/s  %.2fx link (target >= 0.85)\n' "first pass, 1 shard of $SHARD_MB MiB" \
	"$(awk "BEGIN {print $SHARD_BYTES / $fs / 1048576}")" "$(awk "BEGIN {print $SHARD_BYTES / $fs / $LINK}")"
printf '%-44s %8s x file (target <= 1.02)\n' "source bytes, first pass" "$(min_of "${srcratio[@]}")"
printf '%-44s %8s ms (target <= 60)\n' "first byte of an uncached shard" "$(min_of "${fbyte[@]}")"

# Cached pass: the cache of the last run above, a new mount (every block is
# checked on first use), page cache dropped, vs the source file read natively.
# With BASELINE, the baseline reads its own cache the same way, in turn.
native=() cached=() reads=() base_cached=()
mount_dlcache "$SRC" "cache_size=100G,$SLOW"
for run in $(seq 1 "$RUNS"); do
	drop_caches
	native+=("$(seconds_of "$SRC/big/s0.tfrecord")")
	unmount_dlcache
	mount_dlcache "$SRC" "cache_size=100G,$SLOW"
	drop_caches
	before=$(stat_of remote_ops.read)
	cached+=("$(seconds_of "$MNT/big/s0.tfrecord")")
	reads+=($(($(stat_of remote_ops.read) - before)))
	if [ -n "${BASELINE:-}" ]; then
		unmount_dlcache
		CACHE_DIR=$WORK/cache-base DLCACHE=$BASELINE mount_dlcache "$SRC" "cache_size=100G,$SLOW"
		drop_caches
		base_cached+=("$(seconds_of "$MNT/big/s0.tfrecord")")
	fi
done
unmount_dlcache
ns=$(min_of "${native[@]}") cs=$(min_of "${cached[@]}")
printf '%-44s native %6.0f MiB/s, dlcache %6.0f MiB/s: %.2fx (target >= 0.67)\n' "cached pass, page cache dropped" \
	"$(awk "BEGIN {print $SHARD_BYTES / $ns / 1048576}")" "$(awk "BEGIN {print $SHARD_BYTES / $cs / 1048576}")" \
	"$(awk "BEGIN {print $ns / $cs}")"
if [ -n "${BASELINE:-}" ]; then
	bs=$(min_of "${base_cached[@]}")
	printf '%-44s %6.0f MiB/s: %.2fx native\n' "baseline cached pass ($BASELINE)" \
		"$(awk "BEGIN {print $SHARD_BYTES / $bs / 1048576}")" "$(awk "BEGIN {print $ns / $bs}")"
fi
printf '%-44s %8s (target 0)\n' "source reads in the cached passes" "$(printf '%s\n' "${reads[@]}" | sort -g | tail -n 1)"

# Four streams, uncached, and the daemon's RSS growth meanwhile.
four=() growth=()
for run in $(seq 1 "$RUNS"); do
	rm -rf "$WORK/cache"
	mount_dlcache "$SRC" "cache_size=100G,$SLOW"
	warm "$SRC"/big/s[0-3].tfrecord
	base=$(rss_kb)
	touch "$WORK/sampling"
	( peak=$base; while [ -e "$WORK/sampling" ]; do r=$(rss_kb 2>/dev/null || echo 0); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.1; done; echo "$peak" >"$WORK/peak" ) &
	sampler=$!
	printf '%s\n' "$MNT"/big/s[0-3].tfrecord >"$WORK/list4"
	read -r s _ b < <(python3 tests/bench/reader.py "$WORK/list4" 4)
	rm -f "$WORK/sampling"
	wait "$sampler"
	four+=("$s")
	growth+=($((($(cat "$WORK/peak") - base) / 1024)))
	unmount_dlcache
done
fs=$(min_of "${four[@]}")
printf '%-44s %8.0f MiB/s  %.2fx link (target >= 0.85)\n' "four streams, uncached" \
	"$(awk "BEGIN {print 4 * $SHARD_BYTES / $fs / 1048576}")" "$(awk "BEGIN {print 4 * $SHARD_BYTES / $fs / $LINK}")"
printf '%-44s %8s MiB (target <= 300)\n' "daemon RSS growth, four streams (worst run)" "$(printf '%s\n' "${growth[@]}" | sort -g | tail -n 1)"

fi

# Three shuffled epochs over 10 shards, a cache of half of them, no scores;
# cache_max_file=16M so that shards smaller than the default 64M are blocks too.
rm -rf "$WORK/cache"
half=$((5 * ((EPOCH_MB << 20) + 0)))
mount_dlcache "$SRC" "cache_size=$half,cache_max_file=16M,$SLOW"
prev_c=0 prev_r=0
for epoch in 1 2 3; do
	# The kernel keeps a mount's pages across opens: drop them, so that
	# every epoch reads through the daemon and the ratio is its cache's.
	drop_caches
	ls "$MNT"/epoch/*.tfrecord | shuf --random-source=<(yes "$epoch") >"$WORK/order"
	python3 tests/bench/reader.py "$WORK/order" 1 >/dev/null
	c=$(stat_of bytes_from_cache) r=$(stat_of bytes_from_remote)
	printf '%-44s %8s\n' "epoch $epoch byte hit ratio" "$(awk "BEGIN {printf \"%.2f\", ($c - $prev_c) / ($c - $prev_c + $r - $prev_r)}")"
	[ "$epoch" = 1 ] && c1=$c r1=$r
	prev_c=$c prev_r=$r
done
printf '%-44s %8s (target >= 0.45)\n' "epochs 2-3 byte hit ratio" "$(awk "BEGIN {printf \"%.2f\", ($c - $c1) / ($c - $c1 + $r - $r1)}")"
printf '%-44s %8s\n' "epochs 1-3 byte hit ratio" "$(awk "BEGIN {printf \"%.2f\", $c / ($c + $r)}")"
unmount_dlcache
