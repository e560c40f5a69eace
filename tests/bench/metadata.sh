#!/usr/bin/env bash
# tests/bench/metadata.sh [ENTRIES] - metadata at ImageNet scale, side by side
# with the native directory: snapshot build vs find, mount time, daemon RSS
# and index bytes per entry, and a full walk (find + stat) native vs mounted.
# Needs root and /dev/fuse; the tree of ENTRIES (default 1,000,000) empty
# files is built once in /var/tmp and reused.
. "$(dirname "$0")/lib.sh"
ENTRIES=${1:-1000000}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-meta-$ENTRIES}
SRC=$BENCH_DIR/src
empty_tree "$BENCH_DIR" "$ENTRIES"

walk() {   # walk DIR -> seconds for find + stat of every file
	local t0
	t0=$(now)
	find "$1" -type f | wc -l >/dev/null
	find "$1" -type f -print0 | xargs -0 stat >/dev/null
	since "$t0"
}

drop_caches
t0=$(now); find "$SRC" -printf '%s\n' | wc -l >/dev/null; find_cold=$(since "$t0")
t0=$(now); find "$SRC" -printf '%s\n' | wc -l >/dev/null; find_warm=$(since "$t0")
t0=$(now); "$DLCACHE" snapshot "$SRC" -o "$WORK/snap.db" >/dev/null; snap=$(since "$t0")

t0=$(now)
mount_dlcache "$SRC" "snapshot=$WORK/snap.db"
mount_s=$(since "$t0")
rss_mount=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)

drop_caches
native_walk=$(walk "$SRC")
mnt_walk1=$(walk "$MNT")
mnt_walk2=$(walk "$MNT")
native_walk2=$(walk "$SRC")
rss_walk=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
entries=$(stat_of snapshot.entries)
index=$(stat_of snapshot.index_memory)

cat <<TXT
entries                         $entries
snapshot build                  ${snap}s   (find -printf cold ${find_cold}s, warm ${find_warm}s; ratio to cold $(ratio "$snap" "$find_cold"), to warm $(ratio "$snap" "$find_warm"))
mount with a ready snapshot     ${mount_s}s
index memory                    $index bytes = $((index / entries)) B/entry
daemon RSS after mount          $((rss_mount / 1024)) MiB = $((rss_mount * 1024 / entries)) B/entry
daemon RSS after full walk      $((rss_walk / 1024)) MiB = $((rss_walk * 1024 / entries)) B/entry
walk (find + stat every file)   native cold ${native_walk}s, mounted first ${mnt_walk1}s (ratio $(ratio "$mnt_walk1" "$native_walk")); native warm ${native_walk2}s, mounted second ${mnt_walk2}s (ratio $(ratio "$mnt_walk2" "$native_walk2"))
remote metadata calls after mount $(stat_of remote_ops.metadata)
TXT
