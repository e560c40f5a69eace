#!/usr/bin/env bash
# tests/bench/read.sh [FILES] - the read path side by side with native reads:
#   hits:   every cached file read through the mount vs the cache's own files
#           read natively, page cache cold (dropped) and warm, 1 and 4 readers;
#   misses: 8 readers over an emulated slow source (source_delay, source_bw)
#           vs the throughput that source allows.
# FILES (default 20000) files of ~110 KB in 100 classes, built once in
# $BENCH_DIR.  Needs root and /dev/fuse.  Prints ratios.
. "$(dirname "$0")/lib.sh"
FILES=${1:-20000}
DELAY=${DELAY:-2ms}
BW=${BW:-1G}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
SRC=$BENCH_DIR/src
data_tree "$BENCH_DIR" "$FILES"

run() { python3 tests/bench/reader.py "$1" "$2"; }   # -> "seconds files bytes"
mbps() { awk "BEGIN {printf \"%.0f\", $2 / $1 / 1048576}"; }

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"

# Fill the cache, then list the cache's own files in the same order.
mount_dlcache "$SRC" cache_size=100G
run "$WORK/mounted" 4 >/dev/null
unmount_dlcache
sqlite3 -separator ' ' "$WORK/cache/index.db" 'SELECT path, name FROM entries' | python3 -c '
import sys
cache, order = sys.argv[1], sys.argv[2]
names = dict(line.split(" ", 1) for line in sys.stdin.read().splitlines())
for p in open(order).read().split():
    n = names[p]
    print("%s/data/%s/%s" % (cache, n[:2], n))' "$WORK/cache" "$WORK/order" >"$WORK/native"
mount_dlcache "$SRC" cache_size=100G
echo "hits: $FILES files, $(du -sh "$WORK/cache/data" | cut -f1) cached"
printf '%-34s %10s %10s %7s\n' "" "native" "dlcache" "ratio"
for readers in 1 4; do
	drop_caches; read -r ns _ nb < <(run "$WORK/native" $readers)
	drop_caches; read -r ds _ db < <(run "$WORK/mounted" $readers)
	[ "$nb" = "$db" ] || echo "bytes differ: native $nb, dlcache $db"
	printf '%-34s %7s MB/s %7s MB/s %7s\n' "cold page cache, $readers reader(s)" "$(mbps "$ns" "$nb")" "$(mbps "$ds" "$db")" "$(ratio "$ns" "$ds")"
	run "$WORK/native" $readers >/dev/null; run "$WORK/mounted" $readers >/dev/null
	read -r ns _ nb < <(run "$WORK/native" $readers)
	read -r ds _ db < <(run "$WORK/mounted" $readers)
	printf '%-34s %7s MB/s %7s MB/s %7s\n' "warm page cache, $readers reader(s)" "$(mbps "$ns" "$nb")" "$(mbps "$ds" "$db")" "$(ratio "$ns" "$ds")"
done
unmount_dlcache

# Misses: nothing cached, the source slowed down; the bound is what 8
# concurrent streams of open + one read + close get from it.
rm -rf "$WORK/cache"
mount_dlcache "$SRC" "cache_size=100G,policy=none,source_delay=$DELAY,source_bw=$BW"
head -n 2000 "$WORK/mounted" >"$WORK/miss"
drop_caches; read -r ms mf mb < <(run "$WORK/miss" 8)
unmount_dlcache
bound=$(python3 - "$DELAY" "$BW" "$mf" "$mb" <<'PY'
import sys
def seconds(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
def size(text):
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
    return float(text.rstrip("KMG")) * scale
delay, bw, files, nbytes = seconds(sys.argv[1]), size(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
per_file = 3 * delay + nbytes / files / bw      # open, one read, close
# 8 streams, and the one link they share
print("%.1f" % (min(8 * nbytes / files / per_file, bw) / 2**20))
PY
)
echo "misses: 2000 files, 8 readers, source_delay=$DELAY source_bw=$BW"
echo "  dlcache $(mbps "$ms" "$mb") MB/s; the emulated source allows $bound MB/s at 8 streams; ratio $(awk "BEGIN {printf \"%.2f\", $mb / $ms / 1048576 / $bound}")"
