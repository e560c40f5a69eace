#!/usr/bin/env bash
# examples/demo.sh - from a fresh Debian 12 machine to a cached training read:
# installs what is missing, builds dlcache, generates a small ImageFolder
# dataset, mounts it with mount.dlcache, reads it for two shuffled epochs,
# prints the stats, unmounts and cleans up.  Run it as root (FUSE mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" "${DLC_RUN_PACKAGES[@]}"

[ -d build/meson-private ] || meson setup build >/dev/null
ninja -C build >/dev/null

work=$(mktemp -d /tmp/dlcache-demo.XXXXXX)
mnt=$work/mnt
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt"
ln -s "$PWD/build/dlcache" "$work/mount.dlcache"

echo "== generating a dataset"
python3 examples/make_dataset.py "$work/imagenet" --classes 10 --per-class 200

echo "== mounting: mount.dlcache $work/imagenet $mnt -o cache_dir=$work/cache,cache_size=1G"
"$work/mount.dlcache" "$work/imagenet" "$mnt" -o "cache_dir=$work/cache,cache_size=1G"

echo "== two training epochs in shuffled order"
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
python3 examples/read_epochs.py "$mnt" --epochs 2

echo "== dlcache stat $mnt"
build/dlcache stat "$mnt"

umount "$mnt"
echo "== unmounted; the cache in $work/cache would be reused by the next mount"
