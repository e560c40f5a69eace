#!/usr/bin/env bash
# tests/bench/announced_hits.sh [FILES] - cold cache hits, announced or not.
#
# A job whose sampler announces its order (`prefetch PATH` lines in
# .control, as the dlcache package's CacheAwareSampler writes them) lets
# the prefetcher read the cache files of its coming hits ahead, so that a
# hit whose pages left memory does not wait for the disk.  This fills a
# cache with FILES files of ~110 KB (default 4000, the tree of
# tests/bench/read.sh), remounts it (OPTS adds mount options) and reads
# every file once (the first hits, checked); then, ROUNDS times (default
# 3), with 1 and 4 reader threads (tests/bench/reader.py), page cache
# dropped before each pass (DROP, as read.sh), reads in one shuffled order:
#   native     the cache's own files, natively;
#   plain      through the mount, nothing announced;
#   announced  through the mount, the whole order written to .control
#              just before the pass starts (not timed).
# Prints the best of ROUNDS of each as MB/s and as a ratio to native, and
# the mount's `warmed` count (announced hits read ahead).  Needs root.
# BASELINE=/path/to/older/dlcache runs the same passes through that binary
# too, on the same cache, in turn within each round (each binary mounted
# afresh per round and its first hits read whole before the timed passes),
# and prints its rows and this build's ratio to it.
. "$(dirname "$0")/lib.sh"
FILES=${1:-4000}
ROUNDS=${ROUNDS:-3}
OPTS=${OPTS:-}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-read-$FILES}
data_tree "$BENCH_DIR" "$FILES"
SRC=$BENCH_DIR/src
uring_switch_for "$OPTS"
run() { python3 tests/bench/reader.py "$1" "$2"; }   # -> "seconds files bytes"

(cd "$SRC" && find train -type f) | shuf --random-source=<(yes) >"$WORK/order"
sed "s|^|$MNT/|" "$WORK/order" >"$WORK/mounted"
sed "s|^|prefetch |" "$WORK/order" >"$WORK/announce"
mount_dlcache "$SRC" cache_size=100G
run "$WORK/mounted" 4 >/dev/null
unmount_dlcache
cache_files_in_order "$WORK/cache" "$WORK/order" >"$WORK/native"

# passes NAME: one round of timed passes through a fresh mount of $DLCACHE.
passes() {
	mount_dlcache "$SRC" "cache_size=100G${OPTS:+,$OPTS}"
	run "$WORK/mounted" 4 >/dev/null     # the first hits: read whole and checked
	for readers in 1 4; do
		drop_caches; read -r s _ _ < <(run "$WORK/mounted" "$readers"); keep_min "$1plain $readers" "$s"
		drop_caches; cat "$WORK/announce" >"$MNT/.control"
		read -r s _ _ < <(run "$WORK/mounted" "$readers"); keep_min "$1announced $readers" "$s"
	done
	warmed=$(stat_of warmed) hits=$(stat_of hits)
	unmount_dlcache
}
for round in $(seq "$ROUNDS"); do
	for readers in 1 4; do
		drop_caches; read -r s _ bytes < <(run "$WORK/native" "$readers"); keep_min "native $readers" "$s"
	done
	if [ -n "${BASELINE:-}" ]; then
		DLCACHE=$BASELINE passes base-
		base_warmed=$warmed base_hits=$hits
	fi
	passes ""
done

echo "cold hits: $FILES files, best of $ROUNDS rounds, drop_caches=${DROP:-3}, mount options: ${OPTS:-none}"
printf '%-12s %10s %17s %17s\n' "" "native" "plain" "announced"
for readers in 1 4; do
	n=${best[native $readers]} p=${best[plain $readers]} a=${best[announced $readers]}
	printf '%-12s %5s MB/s %5s MB/s %5s %5s MB/s %5s\n' "$readers reader(s)" "$(mbps "$n" "$bytes")" \
		"$(mbps "$p" "$bytes")" "$(ratio "$n" "$p")" "$(mbps "$a" "$bytes")" "$(ratio "$n" "$a")"
done
echo "  warmed (announced hits read ahead): $warmed of $hits hits (last round)"
if [ -n "${BASELINE:-}" ]; then
	echo "baseline ($BASELINE), and this build's speed as a ratio to it (> 1: faster):"
	for readers in 1 4; do
		p=${best[base-plain $readers]} a=${best[base-announced $readers]}
		printf '%-12s %16s %5s MB/s %5s %5s MB/s %5s\n' "$readers reader(s)" "" \
			"$(mbps "$p" "$bytes")" "$(ratio "$p" "${best[plain $readers]}")" \
			"$(mbps "$a" "$bytes")" "$(ratio "$a" "${best[announced $readers]}")"
	done
	echo "  baseline warmed: $base_warmed of $base_hits hits (last round)"
fi
