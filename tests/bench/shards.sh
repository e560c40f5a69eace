#!/usr/bin/env bash
# tests/bench/shards.sh - the first epoch of a WebDataset-style job over a
# slow source, with and without announcing its shard order: SHARDS tar
# shards of SHARD_MB MiB (samples of ~110 KB, a .jpg and a .cls each),
# larger than cache_max_file (so read by blocks), streamed one after the
# other with Python's tarfile (mode "r|", as WebDataset reads them) in a
# shuffled order, through a mount over the emulated link (source_delay=DELAY
# per call, source_bw=BW shared by every call).  "announced" writes the
# epoch's order as prefetch lines to .control first with the dlcache
# package's dlcache.ShardOrder (python/ of this tree); "plain" draws the
# same order and announces nothing.  Each run starts with an
# empty cache and dropped page caches; RUNS (default 3) runs of each, the
# best printed, then the ratio announced / plain (below 1: faster).
# COMPUTE_MS (default 0) adds that much work per sample (a training step's
# share), which the stream overlaps with the source.  Built once under
# $BENCH_DIR.  Needs root and /dev/fuse.  The machine is shared: read the
# load average printed with the figures.
. "$(dirname "$0")/lib.sh"
SHARDS=${SHARDS:-8}
SHARD_MB=${SHARD_MB:-32}
DELAY=${DELAY:-10ms}
BW=${BW:-200M}
RUNS=${RUNS:-3}
COMPUTE_MS=${COMPUTE_MS:-0}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-shards-$SHARDS-$SHARD_MB}
SRC=$BENCH_DIR/src
OPTS="cache_max_file=8M,source_delay=$DELAY,source_bw=$BW,passthrough=0"

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating $SHARDS tar shards of $SHARD_MB MiB under $SRC ..."
	rm -rf "$SRC"
	python3 - "$SRC/shards" "$SHARDS" "$SHARD_MB" <<'PY'
import io, os, random, sys, tarfile
root, shards, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
rng = random.Random(38)
key = 0
for s in range(shards):
    with tarfile.open(os.path.join(root, "shard-%06d.tar" % s), "w", format=tarfile.GNU_FORMAT) as tar:
        size = 0
        while size < mb << 20:
            for ext, data in (("jpg", rng.randbytes(rng.randrange(60000, 160000))),
                              ("cls", b"%d\n" % rng.randrange(1000))):
                info = tarfile.TarInfo("%06d.%s" % (key, ext))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                size += 512 + (len(data) + 511) // 512 * 512
            key += 1
PY
	touch "$BENCH_DIR/complete"
fi

# epoch ANNOUNCE: one first epoch in a fresh cache; prints its seconds.
epoch() {
	rm -rf "$WORK/cache"
	drop_caches
	mount_dlcache "$SRC" "$OPTS"
	PYTHONPATH=$PWD/python python3 - "$MNT" "$1" "$COMPUTE_MS" <<'PY'
import os, sys, tarfile, time
import dlcache
mnt, announce, compute = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3]) / 1000
shards = sorted(os.path.join(mnt, "shards", n) for n in os.listdir(os.path.join(mnt, "shards")))
start = time.monotonic()
# The same shuffled order either way; announced, it is written as prefetch lines.
order = dlcache.ShardOrder(shards, dlcache.Mount(mnt) if announce else None, seed=1)
samples = 0
for path in order.set_epoch(0):
    with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tar:
        for member in tar:
            tar.extractfile(member).read()
            samples += 1
            if compute:
                end = time.monotonic() + compute
                while time.monotonic() < end:
                    pass
print("%.3f" % (time.monotonic() - start))
PY
	unmount_dlcache
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
	plain=$(epoch 0)
	announced=$(epoch 1)
	echo "run $run: plain ${plain} s, announced ${announced} s"
	keep_min plain "$plain"
	keep_min announced "$announced"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
total_mb=$(du -sm "$SRC/shards" | cut -f1)
echo "first epoch, $SHARDS shards of $SHARD_MB MiB ($total_mb MiB), source_delay=$DELAY source_bw=$BW, COMPUTE_MS=$COMPUTE_MS, best of $RUNS:"
echo "  plain      ${best[plain]} s ($(mbps "${best[plain]}" $((total_mb << 20))) MiB/s)"
echo "  announced  ${best[announced]} s ($(mbps "${best[announced]}" $((total_mb << 20))) MiB/s)"
echo "  announced / plain: $(ratio "${best[announced]}" "${best[plain]}")"
