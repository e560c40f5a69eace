#!/usr/bin/env bash
# tests/bench/nfs.sh [ENTRIES] [FILES] - NFS sources side by side with libnfs's
# own tools, against a private nfs-ganesha (NFSv4, 127.0.0.1, see
# tests/mount/ganesha.sh) serving trees built in /var/tmp:
#   crawl:  the snapshot of ENTRIES (default 30000) empty files in 1000
#           directories over NFS (dlcache snapshot, 1, 4 and 16 threads) vs
#           nfs-ls -R (libnfs, one connection) and find on the exported
#           directory itself (local, no NFS); entries per second;
#   misses: the first read of FILES (default 2000) files of ~110 KB through
#           the mount by 8 readers (reader.py), policy=none and the default
#           policy, vs nfs-cp of the same files, 8 at a time (one process and
#           connection per file), and vs one nfs-cp of a file as large as all
#           of them together (one stream).
# The server's page cache is warmed first, so both sides measure NFS, not the
# disk.  Needs root, /dev/fuse, nfs-ganesha and libnfs-utils; the trees are
# deleted on exit.
. "$(dirname "$0")/lib.sh"
. tests/mount/ganesha.sh
ENTRIES=${1:-30000}
FILES=${2:-2000}
BENCH_DIR=$(mktemp -d /var/tmp/dlcache-bench-nfs.XXXXXX)
SHM=$(mktemp -d /dev/shm/dlcache-bench-nfs.XXXXXX)
trap 'stop_ganesha; cleanup; rm -rf "$BENCH_DIR" "$SHM"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

nfs_url() { echo "nfs://127.0.0.1/export/$1?version=4&nfsport=$GANESHA_PORT"; }
rate() { awk "BEGIN {printf \"%.0f\", $1 / $2}"; }

empty_tree "$BENCH_DIR/meta" "$ENTRIES" >/dev/null
data_tree "$BENCH_DIR/data" "$FILES" >/dev/null
start_ganesha "$BENCH_DIR"

# ---- crawl -------------------------------------------------------------
find "$BENCH_DIR/meta/src" >/dev/null           # warm the server's dentries
t0=$(now); entries=$(find "$BENCH_DIR/meta/src" -printf '%s\n' | wc -l); find_s=$(since "$t0")
t0=$(now); ls_lines=$(nfs-ls -R "$(nfs_url meta/src)" | wc -l); ls_s=$(since "$t0")
echo "crawl: $entries entries ($ENTRIES empty files in 1000 directories) over NFSv4"
printf '%-44s %9s %12s %8s\n' "" "seconds" "entries/s" "vs nfs-ls"
printf '%-44s %9s %12s %8s\n' "find on the exported directory (local)" "$find_s" "$(rate "$entries" "$find_s")" ""
printf '%-44s %9s %12s %8s\n' "nfs-ls -R (libnfs, one connection)" "$ls_s" "$(rate "$ls_lines" "$ls_s")" "1.00"
for threads in 1 4 16; do
	t0=$(now)
	out=$("$DLCACHE" snapshot "$(nfs_url meta/src)" -o "$WORK/snap.db" --threads "$threads" 2>/dev/null)
	s=$(since "$t0")
	n=$(echo "$out" | awk '{print $2}')
	printf '%-44s %9s %12s %8s\n' "dlcache snapshot, $threads thread(s)" "$s" "$(rate "$n" "$s")" \
		"$(ratio "$(rate "$n" "$s")" "$(rate "$ls_lines" "$ls_s")")"
done
rm -f "$WORK/snap.db"

# ---- misses ------------------------------------------------------------
DATA=$BENCH_DIR/data/src
(cd "$DATA" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"
bytes=$(cd "$DATA" && xargs -a "$WORK/order" -d '\n' cat | wc -c)
head -c "$bytes" /dev/urandom >"$BENCH_DIR/data/stream.bin"
cat "$BENCH_DIR/data/stream.bin" >/dev/null
(cd "$DATA" && xargs -a "$WORK/order" -d '\n' cat >/dev/null)   # warm the server side

echo
echo "misses: $FILES files, $((bytes / 1048576)) MiB, first read of each over NFSv4"
printf '%-52s %9s %9s %8s\n' "" "seconds" "MB/s" "vs nfs-cp"
# nfs-cp per file, 8 workers, each copy to a fresh file in RAM (nfs-cp never
# overwrites); the baseline the others are compared with.
t0=$(now)
workers=()
for w in 0 1 2 3 4 5 6 7; do
	awk -v w="$w" 'NR % 8 == w' "$WORK/order" | {
		n=0
		while IFS= read -r f; do
			nfs-cp "$(nfs_url "data/src/$f")" "$SHM/$w.$n" >/dev/null || echo "nfs-cp failed: $f" >&2
			n=$((n + 1))
		done
	} &
	workers+=($!)
done
wait "${workers[@]}"
cp_s=$(since "$t0")
cp_bytes=$(du -sb "$SHM" | cut -f1)
rm -rf "${SHM:?}"/*
printf '%-52s %9s %9s %8s\n' "nfs-cp per file, 8 at a time" "$cp_s" "$(mbps "$cp_s" "$cp_bytes")" "1.00"
t0=$(now); nfs-cp "$(nfs_url data/stream.bin)" "$SHM/stream" >/dev/null; stream_s=$(since "$t0")
rm -f "$SHM/stream"
printf '%-52s %9s %9s %8s\n' "nfs-cp of one file of the same size (one stream)" "$stream_s" \
	"$(mbps "$stream_s" "$bytes")" "$(ratio "$cp_s" "$stream_s")"
for policy in none importance; do
	rm -rf "$WORK/cache"
	mount_dlcache "$(nfs_url data/src)" "cache_size=100G,policy=$policy"
	read -r ds df db < <(python3 tests/bench/reader.py "$WORK/mounted" 8)
	[ "$df" = "$FILES" ] && [ "$db" = "$bytes" ] || echo "dlcache read $df files, $db bytes"
	[ "$(stat_of remote_ops.errors)" = 0 ] || echo "remote errors: $(stat_of remote_ops.errors)"
	unmount_dlcache
	printf '%-52s %9s %9s %8s\n' "dlcache, 8 readers, policy=$policy" "$ds" "$(mbps "$ds" "$db")" \
		"$(ratio "$cp_s" "$ds")"
done
