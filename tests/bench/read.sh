#!/usr/bin/env bash
# tests/bench/read.sh [FILES] - the read path side by side with native reads:
#   hits:   every cached file read through the mount vs the cache's own files
#           read natively, page cache cold (dropped) and warm, 1 and 4
#           readers, for this build (passthrough on where it can be) and a
#           baseline (default: this binary with passthrough=0, the daemon
#           splicing every hit), one mount after the other in each round;
#           the best of ROUNDS rounds (default 3) of each; plus the cost of
#           one warm open+close (the OPEN round trip), and the first pass
#           after mount, whose hits are read whole and checked (xxh3);
#   misses: MISS_READERS readers (default 8) over an emulated slow source
#           (source_delay, source_bw) vs the throughput that source allows,
#           both builds.
# FILES (default 20000) files of ~110 KB in 100 classes, built once in
# $BENCH_DIR.  Needs root and /dev/fuse.  Prints ratios.
#
# Environment: ROUNDS; THIS_OPTS (this build's mount options, default none);
# BASELINE (a dlcache binary, default this one) and BASELINE_OPTS (its mount
# options, default passthrough=0; set it empty for a binary without that
# option), e.g. a build against the system's libfuse:
#     DLC_LIBFUSE=system BUILD=build-sys tests/build.sh
#     BASELINE=build-sys/dlcache BASELINE_OPTS= tests/bench/read.sh 4000
# or FUSE over io_uring against /dev/fuse, both with passthrough:
#     THIS_OPTS=io_uring=1 BASELINE_OPTS= tests/bench/read.sh 4000
# DROP=1 makes "cold" drop the page cache only (dentries and inodes stay,
# so a cold hit costs no LOOKUP); the default, 3, drops them too.
# With io_uring=1 in either, the kernel's switch
# (/sys/module/fuse/parameters/enable_uring) is set to Y for the run and
# its previous value written back on exit.
. "$(dirname "$0")/lib.sh"
FILES=${1:-20000}
DELAY=${DELAY:-2ms}
BW=${BW:-1G}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
SRC=$BENCH_DIR/src
data_tree "$BENCH_DIR" "$FILES"
THIS_OPTS=${THIS_OPTS:-}
BASELINE_OPTS=${BASELINE_OPTS-passthrough=0}
uring_switch_for "$THIS_OPTS,$BASELINE_OPTS"

run() { python3 tests/bench/reader.py "$1" "$2"; }   # -> "seconds files bytes"

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"

# Fill the cache, then list the cache's own files in the same order.
mount_dlcache "$SRC" cache_size=100G
run "$WORK/mounted" 4 >/dev/null
unmount_dlcache
cache_files_in_order "$WORK/cache" "$WORK/order" >"$WORK/native"
ROUNDS=${ROUNDS:-3}
BASELINE=${BASELINE:-$DLCACHE}
THIS=$DLCACHE

# opens LIST: microseconds per open+close of every file in LIST (no read).
opens() {
	python3 - "$1" <<'PY'
import os, sys, time
paths = [p for p in open(sys.argv[1]).read().split("\n") if p]
start = time.monotonic()
for p in paths:
    os.close(os.open(p, os.O_RDONLY))
print("%.1f" % ((time.monotonic() - start) / len(paths) * 1e6))
PY
}
# with BUILD: mounts the cache with this build ("this") or the baseline.
with() {
	if [ "$1" = this ]; then DLCACHE=$THIS mount_dlcache "$SRC" "cache_size=100G${THIS_OPTS:+,$THIS_OPTS}"
	else DLCACHE=$BASELINE mount_dlcache "$SRC" "cache_size=100G${BASELINE_OPTS:+,$BASELINE_OPTS}"; fi
}

echo "hits: $FILES files, $(du -sh "$WORK/cache/data" | cut -f1) cached, best of $ROUNDS rounds; cold: drop_caches=${DROP:-3}"
echo "  this: $("$THIS" --version) ${THIS_OPTS:+-o $THIS_OPTS}; baseline: $("$BASELINE" --version) ${BASELINE_OPTS:+-o $BASELINE_OPTS}"
for round in $(seq 1 "$ROUNDS"); do
	for build in this baseline; do
		with $build
		# The first pass after mount reads and checks every entry.
		drop_caches; read -r s _ b < <(run "$WORK/mounted" 4); keep_min "$build first" "$s"
		for readers in 1 4; do
			drop_caches; read -r s _ nb < <(run "$WORK/native" $readers); keep_min "native cold $readers" "$s"
			drop_caches; read -r s _ db < <(run "$WORK/mounted" $readers); keep_min "$build cold $readers" "$s"
			[ "$nb" = "$db" ] || echo "bytes differ: native $nb, dlcache $db"
			run "$WORK/native" $readers >/dev/null; run "$WORK/mounted" $readers >/dev/null
			read -r s _ _ < <(run "$WORK/native" $readers); keep_min "native warm $readers" "$s"
			read -r s _ _ < <(run "$WORK/mounted" $readers); keep_min "$build warm $readers" "$s"
		done
		keep_min "native open" "$(opens "$WORK/native")"
		keep_min "$build open" "$(opens "$WORK/mounted")"
		if [ "$build" = this ]; then
			pt_hits=$(stat_of hits_passthrough) pt_on=$(stat_of cache.passthrough)
			uring_on=$(stat_of fuse.io_uring 2>/dev/null || echo "(no fuse.io_uring)")
		else
			base_uring=$(stat_of fuse.io_uring 2>/dev/null || echo "(no fuse.io_uring)")
		fi
		unmount_dlcache
	done
done
bytes=$nb
echo "  this build: cache.passthrough $pt_on, $pt_hits hits passed through in its last round, fuse.io_uring $uring_on; baseline: fuse.io_uring $base_uring"
printf '%-34s %10s %17s %17s\n' "" "native" "this build" "baseline"
row() {   # row LABEL KEY
	local n=${best[native $2]} t=${best[this $2]} b=${best[baseline $2]}
	printf '%-34s %5s MB/s %5s MB/s %5s %5s MB/s %5s\n' "$1" "$(mbps "$n" "$bytes")" \
		"$(mbps "$t" "$bytes")" "$(ratio "$n" "$t")" "$(mbps "$b" "$bytes")" "$(ratio "$n" "$b")"
}
for readers in 1 4; do
	row "cold page cache, $readers reader(s)" "cold $readers"
	row "warm page cache, $readers reader(s)" "warm $readers"
done
printf '%-34s %10s %11s MB/s %11s MB/s\n' "first pass after mount (xxh3), 4" "" \
	"$(mbps "${best[this first]}" "$bytes")" "$(mbps "${best[baseline first]}" "$bytes")"
printf '%-34s %7s us %14s us %14s us\n' "warm open+close, 1 reader" "${best[native open]}" \
	"${best[this open]}" "${best[baseline open]}"

# Misses: nothing cached, the source slowed down; the bound is what 8
# concurrent streams of open + one read + close get from it.
MISS_READERS=${MISS_READERS:-8}
head -n 2000 "$WORK/mounted" >"$WORK/miss"
for round in $(seq 1 "$ROUNDS"); do
	for build in this baseline; do
		rm -rf "$WORK/cache"
		if [ "$build" = this ]; then
			DLCACHE=$THIS mount_dlcache "$SRC" "cache_size=100G,policy=none,source_delay=$DELAY,source_bw=$BW${THIS_OPTS:+,$THIS_OPTS}"
		else
			DLCACHE=$BASELINE mount_dlcache "$SRC" "cache_size=100G,policy=none,source_delay=$DELAY,source_bw=$BW${BASELINE_OPTS:+,$BASELINE_OPTS}"
		fi
		drop_caches; read -r ms mf mb < <(run "$WORK/miss" "$MISS_READERS"); keep_min "$build miss" "$ms"
		unmount_dlcache
	done
done
bound=$(python3 - "$DELAY" "$BW" "$mf" "$mb" "$MISS_READERS" <<'PY'
import sys
def seconds(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
def size(text):
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
    return float(text.rstrip("KMG")) * scale
delay, bw, files, nbytes = seconds(sys.argv[1]), size(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
streams = int(sys.argv[5])
per_file = 3 * delay + nbytes / files / bw      # open, one read, close
# the streams, and the one link they share
print("%.1f" % (min(streams * nbytes / files / per_file, bw) / 2**20))
PY
)
echo "misses: 2000 files, $MISS_READERS readers, source_delay=$DELAY source_bw=$BW; the emulated source allows $bound MB/s at $MISS_READERS streams"
for build in this baseline; do
	ms=${best[$build miss]}
	echo "  $build: $(mbps "$ms" "$mb") MB/s, ratio $(awk "BEGIN {printf \"%.2f\", $mb / $ms / 1048576 / $bound}")"
done
