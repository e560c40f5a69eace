#!/usr/bin/env bash
# examples/demo.sh - from a fresh Debian 12 machine to a cached training read:
# installs what is missing (PyTorch from Debian included), builds dlcache,
# generates a synthetic ImageFolder dataset, mounts it with mount.dlcache
# behind a cache that holds about 30% of it, trains a small CNN on it for
# three epochs (examples/train.py: loss ranks to .control, cache-aware
# sampling), prints the stats, unmounts and cleans up.  A minute or two on
# two cores.  Run it as root (FUSE mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" "${DLC_RUN_PACKAGES[@]}" "${DLC_TRAIN_PACKAGES[@]}"

tests/build.sh

work=$(mktemp -d /tmp/dlcache-demo.XXXXXX)
mnt=$work/mnt
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt"
ln -s "$PWD/build/dlcache" "$work/mount.dlcache"

echo "== generating a dataset: 10 classes, 3000 training and 500 validation JPEGs"
/usr/bin/python3 examples/make_dataset.py "$work/imagenet" --classes 10 --per-class 300

# Each training file is charged two 4 KiB blocks: 7 MiB holds about 30%.
opts="cache_dir=$work/cache,cache_size=7M"
echo "== mounting: mount.dlcache $work/imagenet $mnt -o $opts"
"$work/mount.dlcache" "$work/imagenet" "$mnt" -o "$opts"

echo "== training 3 epochs on $mnt (ranks to .control, cache-aware sampler)"
/usr/bin/python3 examples/train.py --data "$mnt" --epochs 3
echo "   $(grep -c . "$mnt/.cached") files cached of $(find "$work/imagenet" -type f | wc -l)"

echo "== dlcache stat $mnt"
build/dlcache stat "$mnt"

umount "$mnt"
echo "== unmounted; the cache in $work/cache would be reused by the next mount"
