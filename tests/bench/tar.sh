#!/usr/bin/env bash
# tests/bench/tar.sh [FILES] - packed datasets side by side with the tree
# they were packed from: the first epoch over an emulated slow source
# (source_delay, source_bw), nothing cached, read in a random order and in a
# chunk-wise order (chunks shuffled, then the files of WINDOW chunks at a
# time shuffled together), for the tree, the packed tree, and the packed
# tree with chunk_fetch=1, with a cache that holds the whole dataset; then
# chunk_fetch=1 again with a cache of a quarter of it; and the source opens
# each epoch cost.
# FILES (default 10000) files of ~110 KB in 100 classes, packed into chunks
# of CHUNK (default 64M), built under $BENCH_DIR and deleted at the end
# (KEEP=1 keeps them).  8 readers.  Needs root and /dev/fuse.  Prints ratios.
. "$(dirname "$0")/lib.sh"
FILES=${1:-10000}
DELAY=${DELAY:-2ms}
BW=${BW:-1G}
CHUNK=${CHUNK:-64M}
WINDOW=${WINDOW:-2}
READERS=${READERS:-8}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-tar-$FILES}
SRC=$BENCH_DIR/src
PACKED=$BENCH_DIR/packed
[ "${KEEP:-0}" = 1 ] || trap 'cleanup; rm -rf "$BENCH_DIR"' EXIT
data_tree "$BENCH_DIR" "$FILES"
if [ ! -f "$PACKED/dlcache.snapshot" ]; then
	rm -rf "$PACKED"
	start=$(now)
	"$DLCACHE" pack "$SRC" "$PACKED" --chunk-size "$CHUNK" >/dev/null
	echo "packed $FILES files into $(find "$PACKED" -name '*.tar' | wc -l) chunks of $CHUNK in $(since "$start") s"
fi

# The two orders, from the packed mount's .chunks (paths are the tree's too).
mount_dlcache "$PACKED"
cp "$MNT/.chunks" "$WORK/chunks"
unmount_dlcache
python3 - "$WORK/chunks" "$WINDOW" "$WORK" <<'PY'
import collections, random, sys
chunks = collections.defaultdict(list)
for line in open(sys.argv[1], encoding="utf-8"):
    chunk, path = line.rstrip("\n").split("\t", 1)
    chunks[int(chunk)].append(path)
window, work = int(sys.argv[2]), sys.argv[3]
rng = random.Random(1)
paths = [p for c in sorted(chunks) for p in chunks[c]]
rng.shuffle(paths)
open(work + "/random", "w").write("".join(p + "\n" for p in paths))
ids = sorted(chunks)
rng.shuffle(ids)
order = []
for i in range(0, len(ids), window):
    group = [p for c in ids[i:i + window] for p in chunks[c]]
    rng.shuffle(group)
    order += group
open(work + "/chunkwise", "w").write("".join(p + "\n" for p in order))
PY
NCHUNKS=$(cut -f1 "$WORK/chunks" | sort -un | wc -l)
QUARTER=$(( $(du -sb "$SRC" | cut -f1) / 4 ))

# epoch SOURCE ORDER [OPTIONS] -> "seconds bytes opens chunk_reads"
epoch() {
	rm -rf "$WORK/cache"
	mount_dlcache "$1" "cache_size=100G,source_delay=$DELAY,source_bw=$BW${3:+,$3}"
	sed "s|^|$MNT/|" "$WORK/$2" >"$WORK/list"
	drop_caches
	python3 tests/bench/reader.py "$WORK/list" "$READERS" >"$WORK/read"
	read -r seconds _ bytes <"$WORK/read"
	echo "$seconds $bytes $(stat_of remote_ops.open) $(stat_of chunk_reads)"
	unmount_dlcache
}

echo "first epoch: $FILES files ($(du -sh "$SRC" | cut -f1)), $NCHUNKS chunks of $CHUNK, $READERS readers, source_delay=$DELAY source_bw=$BW, chunk-wise window $WINDOW chunks"
printf '%-50s %9s %9s %13s %12s\n' "" "seconds" "vs tree" "source opens" "chunk reads"
base=
for run in "tree|$SRC|random|" "tree|$SRC|chunkwise|" \
	   "packed|$PACKED|random|" "packed|$PACKED|chunkwise|" \
	   "packed, chunk_fetch=1|$PACKED|random|chunk_fetch=1" \
	   "packed, chunk_fetch=1|$PACKED|chunkwise|chunk_fetch=1" \
	   "packed, chunk_fetch=1, cache 1/4|$PACKED|random|chunk_fetch=1,cache_size=$QUARTER" \
	   "packed, chunk_fetch=1, cache 1/4|$PACKED|chunkwise|chunk_fetch=1,cache_size=$QUARTER"; do
	IFS='|' read -r name source order options <<<"$run"
	epoch "$source" "$order" "$options" >"$WORK/result"
	read -r seconds bytes opens chunk_reads <"$WORK/result"
	[ -n "$base" ] || { base=$seconds; base_bytes=$bytes; }
	[ "$bytes" = "$base_bytes" ] || echo "bytes differ: $bytes vs $base_bytes"
	label="$name, $([ "$order" = random ] && echo random || echo chunk-wise) order"
	printf '%-50s %9s %9s %13s %12s\n' "$label" "$seconds" "$(ratio "$base" "$seconds")x" "$opens" "$chunk_reads"
done
