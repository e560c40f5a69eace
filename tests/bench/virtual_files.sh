#!/usr/bin/env bash
# tests/bench/virtual_files.sh [ENTRIES] - a hit's latency while .cached is
# read in a loop, against its latency with the mount otherwise idle.  A
# rendering of .cached looks at every inode of the dataset; it must not keep
# hits waiting for the cache lock meanwhile (issue 36: at most 2x).
#
# The cache of ENTRIES (default 1,000,000) entries is made cheaply: a tree of
# ENTRIES empty files plus 1000 files of 4 KiB under hits/ (built once under
# /var/tmp), a mount that caches the hits/ files for real, and then a row per
# empty file written straight into the unmounted cache's index.db (an empty
# file's entry has no bytes to hold; the mount restores the rows as ready
# entries, and .cached lists them all).  A hit is an open, a 4 KiB read and
# a close of one of the hits/ files, each of which reaches the daemon (OPEN
# always does; the page cache may answer the read).
#
# Prints the median and 99th percentile of a hit, idle and while .cached is
# read in a loop, the best of ROUNDS (default 3) rounds, and their ratios.
# Needs root and /dev/fuse.  The machine this runs on may be shared: note the
# load average printed with the figures.
. "$(dirname "$0")/lib.sh"
ENTRIES=${1:-1000000}
ROUNDS=${ROUNDS:-3}
HITS=${HITS:-20000}             # hits timed per round
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-virtual-$ENTRIES}
SRC=$BENCH_DIR/src
export CACHE_DIR=$WORK/cache

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating $ENTRIES empty files and 1000 files of 4 KiB under $SRC ..."
	rm -rf "$BENCH_DIR"
	imagenet_names "$SRC" "$ENTRIES"
	python3 - "$SRC/hits" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
for i in range(1000):
    with open(os.path.join(sys.argv[1], "h%04d" % i), "wb") as f:
        f.write(os.urandom(4096))
PY
	touch "$BENCH_DIR/complete"
fi
[ -f "$BENCH_DIR/snap.db" ] || "$DLCACHE" snapshot "$SRC" -o "$BENCH_DIR/snap.db" >/dev/null

# The hits/ files cached for real; then a ready row for every empty file.
t0=$(now)
mount_dlcache "$SRC" "snapshot=$BENCH_DIR/snap.db"
cat "$MNT"/hits/* >/dev/null
for _ in $(seq 300); do [ "$(stat_of cache.entries)" -ge 1000 ] && break; sleep 0.1; done
unmount_dlcache
python3 - "$CACHE_DIR/index.db" "$SRC" <<'PY'
import hashlib, os, sqlite3, sys
db, src = sqlite3.connect(sys.argv[1]), sys.argv[2]
def rows():
    for d, _, files in os.walk(os.path.join(src, "train")):
        for f in files:
            full = os.path.join(d, f)
            rel = os.path.relpath(full, src)
            name = hashlib.blake2b(rel.encode(), digest_size=8).hexdigest()
            yield (rel, name, os.stat(full).st_mtime_ns)
db.executemany("INSERT OR REPLACE INTO entries(path, name, file, offset, size, mtime_ns, hash)"
               " VALUES (?, ?, NULL, 0, 0, ?, 1)", rows())
db.commit()
db.close()
PY
mount_dlcache "$SRC" "snapshot=$BENCH_DIR/snap.db"
entries=$(stat_of cache.entries)
cached_bytes=$(wc -c <"$MNT/.cached")
echo "cache of $entries entries made in $(since "$t0") s; .cached is $((cached_bytes / 1048576)) MiB"

# hit_latencies N OUT: N hits over the hits/ files; their times in us, sorted.
hit_latencies() {
	python3 - "$MNT/hits" "$1" >"$2" <<'PY'
import os, sys, time
root, n = sys.argv[1], int(sys.argv[2])
names = sorted(os.listdir(root))
took = []
for i in range(n):
    path = os.path.join(root, names[i % len(names)])
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    os.read(fd, 4096)
    os.close(fd)
    took.append((time.perf_counter() - t) * 1e6)
took.sort()
print(" ".join("%.1f" % x for x in took))
PY
}
pct() {   # pct FILE P: the P-th percentile of the sorted times in FILE
	python3 -c 'import sys; v=[float(x) for x in open(sys.argv[1]).read().split()]; print("%.1f" % v[min(len(v) - 1, int(len(v) * float(sys.argv[2]) / 100))])' "$1" "$2"
}

renders=0
for round in $(seq 1 "$ROUNDS"); do
	hit_latencies "$HITS" "$WORK/idle"
	keep_min idle_p50 "$(pct "$WORK/idle" 50)"
	keep_min idle_p99 "$(pct "$WORK/idle" 99)"
	rm -f "$WORK/stop"
	python3 - "$MNT/.cached" "$WORK/stop" >"$WORK/renders" <<'PY' &
import os, sys
path, stop = sys.argv[1], sys.argv[2]
n = 0
while not os.path.exists(stop):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    n += 1
print(n)
PY
	loop=$!
	sleep 1        # the first rendering under way
	hit_latencies "$HITS" "$WORK/loaded"
	touch "$WORK/stop"
	wait "$loop"
	renders=$((renders + $(cat "$WORK/renders")))
	keep_min loaded_p50 "$(pct "$WORK/loaded" 50)"
	keep_min loaded_p99 "$(pct "$WORK/loaded" 99)"
done

cat <<TXT
entries in the cache          $entries (.cached $((cached_bytes / 1048576)) MiB; $renders renderings read during the loaded rounds)
hit, idle                     median ${best[idle_p50]} us, p99 ${best[idle_p99]} us   (best of $ROUNDS rounds of $HITS)
hit, .cached read in a loop   median ${best[loaded_p50]} us, p99 ${best[loaded_p99]} us
ratio loaded / idle           median $(ratio "${best[loaded_p50]}" "${best[idle_p50]}"), p99 $(ratio "${best[loaded_p99]}" "${best[idle_p99]}")   (target: at most 2)
load average                  $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs
TXT
