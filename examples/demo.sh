#!/usr/bin/env bash
# examples/demo.sh - what the cache buys, from a fresh Debian 12 machine:
# installs what is missing (PyTorch from Debian included), builds dlcache,
# generates a synthetic ImageFolder dataset, and trains a small CNN on it
# (examples/train.py) twice over the same emulated slow source (5 ms per
# call to the source, 3 calls per miss, one prefetch thread):
#   1. without the cache (policy=none, a plain shuffle): every read goes to
#      the source;
#   2. with a cache holding about 30% of the training files, loss ranks
#      written to .control and the adaptive cache-aware sampler.
# Then it prints the epoch times side by side with the hit ratios, and the
# stats of the second mount.  A minute or two on two cores.  Run it as root
# (FUSE mounts).  EPOCHS=3 and PER_CLASS=200 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" "${DLC_RUN_PACKAGES[@]}" "${DLC_TRAIN_PACKAGES[@]}"

tests/build.sh
# train.py imports the dlcache package from this tree (python/), not an installed one.
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}

EPOCHS=${EPOCHS:-3}
PER_CLASS=${PER_CLASS:-200}
work=$(mktemp -d /tmp/dlcache-demo.XXXXXX)
mnt=$work/mnt
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt"
ln -s "$PWD/build/dlcache" "$work/mount.dlcache"

ntrain=$((PER_CLASS * 10))
echo "== generating a dataset: 10 classes, $ntrain training and 500 validation JPEGs"
/usr/bin/python3 examples/make_dataset.py "$work/imagenet" --classes 10 --per-class "$PER_CLASS"

# Each training file is charged two 4 KiB blocks: 30% of them fit in this.
size=$((ntrain * 3 / 10 * 8192))
slow="source_delay=5ms,prefetch_threads=1,prefetch_window=16"

# train NAME TITLE MOUNT_OPTIONS TRAIN.PY_OPTIONS...
train() {
	local name=$1 title=$2 opts="cache_dir=$work/cache-$1,$3"
	shift 3
	echo "== $title: mount.dlcache $work/imagenet $mnt -o $opts"
	"$work/mount.dlcache" "$work/imagenet" "$mnt" -o "$opts"
	echo "   examples/train.py --data $mnt --epochs $EPOCHS $*"
	/usr/bin/python3 examples/train.py --data "$mnt" --epochs "$EPOCHS" --drop-caches \
		--json "$work/$name.json" "$@" | sed -u 's/^/   /'
}

train nocache "without the cache" "policy=none,$slow" --sampler shuffle --no-report
umount "$mnt"
train cache "with the cache" "policy=importance,cache_size=$size,$slow" --sampler cache-aware --weights
echo "   $(grep -c . "$mnt/.cached") files cached of $(find "$work/imagenet" -type f | wc -l)"

echo "== what the cache buys (hits: opens served by the cache itself, prefetched files not counted)"
/usr/bin/python3 - "$work/nocache.json" "$work/cache.json" <<'PY'
import json, sys
without, with_ = (json.load(open(p))["epochs"] for p in sys.argv[1:3])
print("   epoch   without the cache        with the cache (ranks + cache-aware sampler)")
for a, b in zip(without, with_):
    print("   %5d   %5.1f s  val acc %4.1f%%   %5.1f s  val acc %4.1f%%  hits %5.1f%%  %.2fx faster"
          % (a["epoch"], a["seconds"], 100 * a["val_accuracy"], b["seconds"],
             100 * b["val_accuracy"], 100 * b["cache_hit_ratio"], a["seconds"] / b["seconds"]))
total = sum(e["seconds"] for e in without) / sum(e["seconds"] for e in with_)
print("   in all: %.1f s without the cache, %.1f s with it (%.2fx)"
      % (sum(e["seconds"] for e in without), sum(e["seconds"] for e in with_), total))
PY

echo "== dlcache stat $mnt"
build/dlcache stat "$mnt"

umount "$mnt"
echo "== unmounted; the cache in $work/cache-cache would be reused by the next mount"
