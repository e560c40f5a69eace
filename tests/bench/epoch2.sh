#!/usr/bin/env bash
# tests/bench/epoch2.sh [FILES] - the second epoch of a job, in the mount
# whose first epoch filled the cache, this build beside a BASELINE binary.
#
# A training job mounts once and reads its dataset every epoch.  Epoch 1
# misses and fills the cache; epoch 2 is the first to hit.  Each round, for
# each build: an empty cache, epoch 1 (4 readers, the source on local disk),
# the page cache dropped, then epoch 2 timed, for
#   small files: FILES files of ~110 KB (default 4000), 4 readers;
#   a large file: one 512 MiB file (cached by blocks), read with dd bs=1M;
# and the same files read natively from the source after a drop, for scale.
# Prints the best of ROUNDS (default 3) rounds of each, as MiB/s and as a
# ratio to the native read.  Needs root and /dev/fuse.
#
#     BASELINE=/path/to/older/dlcache tests/bench/epoch2.sh
#
# BASELINE defaults to this binary (then both columns measure the same);
# THIS_OPTS and BASELINE_OPTS add mount options to either side; KINDS
# (default "small big") picks the rows.
. "$(dirname "$0")/lib.sh"
FILES=${1:-4000}
ROUNDS=${ROUNDS:-3}
KINDS=${KINDS:-small big}
BASELINE=${BASELINE:-$DLCACHE}
THIS=$DLCACHE
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
data_tree "$BENCH_DIR" "$FILES"
SRC=$BENCH_DIR/src
BIG=/var/tmp/dlcache-bench-epoch2-big
if [ ! -f "$BIG/complete" ]; then
	mkdir -p "$BIG/src"
	head -c $((512 << 20)) /dev/urandom >"$BIG/src/shard.bin"
	touch "$BIG/complete"
fi

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"
sed "s|^|$SRC/|" "$WORK/order" >"$WORK/native"
run() { python3 tests/bench/reader.py "$1" "$2"; }     # -> "seconds files bytes"
dd_seconds() {
	local t0
	t0=$(now)
	dd if="$1" of=/dev/null bs=1M status=none
	since "$t0"
}
# epoch2 BUILD SOURCE: an empty cache, epoch 1, a drop; prints epoch 2's seconds.
epoch2() {
	local bin=$THIS opts=${THIS_OPTS:-} s
	[ "$1" = this ] || { bin=$BASELINE; opts=${BASELINE_OPTS:-}; }
	rm -rf "$WORK/cache"
	DLCACHE=$bin mount_dlcache "$2" "cache_size=100G${opts:+,$opts}"
	if [ "$2" = "$SRC" ]; then
		run "$WORK/mounted" 4 >/dev/null
		drop_caches
		read -r s _ _ < <(run "$WORK/mounted" 4)
	else
		dd_seconds "$MNT/shard.bin" >/dev/null
		drop_caches
		s=$(dd_seconds "$MNT/shard.bin")
	fi
	unmount_dlcache
	echo "$s"
}

small_bytes=$(cat "$WORK/native" | tr '\n' '\0' | du -cb --files0-from=- | tail -n 1 | cut -f1)
for round in $(seq "$ROUNDS"); do
	for kind in $KINDS; do
		from=$SRC
		[ "$kind" = big ] && from=$BIG/src
		for build in this baseline; do
			keep_min "$build $kind" "$(epoch2 "$build" "$from")"
		done
		drop_caches
		if [ "$kind" = big ]; then
			keep_min "native big" "$(dd_seconds "$BIG/src/shard.bin")"
		else
			read -r s _ _ < <(run "$WORK/native" 4)
			keep_min "native small" "$s"
		fi
	done
	echo "round $round done" >&2
done

echo "epoch 2 in the mount that cached epoch 1, page cache dropped, best of $ROUNDS rounds"
echo "  this: $("$THIS" --version) ${THIS_OPTS:+-o $THIS_OPTS}; baseline: $BASELINE ${BASELINE_OPTS:+-o $BASELINE_OPTS}"
printf '%-36s %10s %18s %18s\n' "" native "this build" baseline
for kind in $KINDS; do
	bytes=$small_bytes label="$FILES files of ~110 KB, 4 readers"
	[ "$kind" = big ] && bytes=$((512 << 20)) label="a 512 MiB file (blocks), dd bs=1M"
	n=${best[native $kind]} t=${best[this $kind]} b=${best[baseline $kind]}
	printf '%-36s %5s MiB/s %5s MiB/s %5s %5s MiB/s %5s\n' "$label" "$(mbps "$n" "$bytes")" \
		"$(mbps "$t" "$bytes")" "$(ratio "$n" "$t")" "$(mbps "$b" "$bytes")" "$(ratio "$n" "$b")"
done
