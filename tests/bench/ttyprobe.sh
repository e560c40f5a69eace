#!/usr/bin/env bash
# tests/bench/ttyprobe.sh [FILES] - what Python's tty probe costs a cached
# sample, side by side in one run: every cached file read through the mount
# (passthrough hits) and the cache's own files read natively, each with
# open(path, "rb").read() (an ioctl per open, which a FUSE mount sends to the
# daemon) and with dlcache.read_sample (unbuffered: none); page cache cold
# (dropped) and warm, 1 and 4 reader threads; the best of ROUNDS rounds
# (default 3).  Prints seconds, ratios to native, and the mount's ioctls
# per file read each way.
#
# FILES (default 4000) files of ~110 KB, built once in $BENCH_DIR.
# THIS_OPTS: extra mount options (io_uring=1 sets the kernel's switch for
# the run).  Needs root and /dev/fuse.
. "$(dirname "$0")/lib.sh"
FILES=${1:-4000}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
SRC=$BENCH_DIR/src
data_tree "$BENCH_DIR" "$FILES"
THIS_OPTS=${THIS_OPTS:-}
uring_switch_for "$THIS_OPTS"
ROUNDS=${ROUNDS:-3}

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"

# Fill the cache, list the cache's own files in the same order, remount and
# read once more (the first hits after a mount are checked: not measured).
mount_dlcache "$SRC" cache_size=100G
python3 tests/bench/reader.py "$WORK/mounted" 4 >/dev/null
unmount_dlcache
cache_files_in_order "$WORK/cache" "$WORK/order" >"$WORK/native"
mount_dlcache "$SRC" "cache_size=100G${THIS_OPTS:+,$THIS_OPTS}"
python3 tests/bench/reader.py "$WORK/mounted" 4 >/dev/null

declare -A ioctls
for round in $(seq "$ROUNDS"); do
	for temp in cold warm; do
		for readers in 1 4; do
			for how in open helper; do
				for where in native mounted; do
					[ "$temp" = cold ] && drop_caches ||
						python3 tests/bench/reader.py "$WORK/$where" 4 helper >/dev/null
					before=$(stat_of ioctls)
					read -r s _ _ < <(python3 tests/bench/reader.py "$WORK/$where" "$readers" "$how")
					[ "$where" = mounted ] && ioctls[$how]=$(($(stat_of ioctls) - before))
					keep_min "$temp,$readers,$how,$where" "$s"
				done
			done
		done
	done
done
echo "$FILES files of ~110 KB, every read a cache hit${THIS_OPTS:+ ($THIS_OPTS)}; best of $ROUNDS rounds, seconds"
echo "ioctls per file read through the mount: open() $(ratio "${ioctls[open]}" "$FILES"), read_sample $(ratio "${ioctls[helper]}" "$FILES")"
echo "columns: native open(), native read_sample, mount open(), mount read_sample; mount/native ratios (throughput) each way; read_sample's gain through the mount"
printf '%-12s %8s %8s %8s %8s %10s %10s %12s\n' cache,readers nat:open nat:help mnt:open mnt:help "open/nat" "helper/nat" "helper-gain"
for temp in cold warm; do
	for readers in 1 4; do
		no=${best[$temp,$readers,open,native]}; nh=${best[$temp,$readers,helper,native]}
		mo=${best[$temp,$readers,open,mounted]}; mh=${best[$temp,$readers,helper,mounted]}
		printf '%-12s %8s %8s %8s %8s %10s %10s %12s\n' "$temp,$readers" "$no" "$nh" "$mo" "$mh" \
			"$(ratio "$no" "$mo")" "$(ratio "$nh" "$mh")" "$(ratio "$mo" "$mh")x"
	done
done
