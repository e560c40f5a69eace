# lib.sh - shared by the benchmarks: a work directory and mountpoint removed
# on exit (unmounting first), trees built once under /var/tmp and reused, and
# timing helpers.  Set DLCACHE to use another binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
DLCACHE=${DLCACHE:-$PWD/build/dlcache}
WORK=$(mktemp -d /tmp/dlcache-bench.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
. tests/debian_python.sh     # lib.sh has cd'ed to the source tree
debian_python_first "$WORK/bin"
dlcache_package_first "$PWD"
PID=
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 143" INT TERM   # a killed run still unmounts

# imagenet_names ROOT N [MIN MAX]: N files with ImageNet-style names in 1000
# class directories under ROOT (ROOT/train/nXXXXXXXX/nXXXXXXXX_I.JPEG), empty,
# or of MIN to MAX random bytes (the same bytes every time).
imagenet_names() {
	python3 - "$@" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
sizes = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else None
rng = random.Random(7)
per = -(-n // 1000)
for i in range(n):
    c = i // per
    d = os.path.join(root, "train", "n%08d" % c)
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "n%08d_%d.JPEG" % (c, i))
    if sizes:
        with open(path, "wb") as f:
            f.write(rng.randbytes(rng.randint(*sizes)))
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
PY
}

# empty_tree DIR N: N empty files with ImageNet-style names in 1000 class
# directories under DIR/src, built once (DIR/complete marks it done).
empty_tree() {
	[ -f "$1/complete" ] && return 0
	echo "creating $2 empty files in 1000 class directories under $1/src ..."
	rm -rf "$1/src"
	imagenet_names "$1/src" "$2"
	touch "$1/complete"
}

# data_tree DIR N: N files of ~110 KB in 100 classes under DIR/src, built once.
data_tree() {
	[ -f "$1/complete" ] && return 0
	echo "creating $2 files of ~110 KB under $1/src ..."
	rm -rf "$1/src"
	/usr/bin/python3 examples/make_dataset.py --random-bytes "$1/src" --classes 100 --per-class $(($2 / 100)) >/dev/null
	touch "$1/complete"
}

# mount_dlcache SRC [OPTIONS]: mounts SRC on $MNT in the foreground (PID in
# $PID) with a cache in $CACHE_DIR (default $WORK/cache), and waits for it
# to answer.
mount_dlcache() {
	"$DLCACHE" mount "$1" "$MNT" -f -o "cache_dir=${CACHE_DIR:-$WORK/cache},log_level=warning${2:+,$2}" &
	PID=$!
	until [ -e "$MNT/.stats" ]; do sleep 0.02; done
}
unmount_dlcache() {
	fusermount3 -u "$MNT"
	wait "$PID"
	PID=
}

# uring_switch_for OPTIONS: when the mount options name io_uring=1, sets the
# kernel's switch (/sys/module/fuse/parameters/enable_uring) to Y for the
# run and writes its previous value back on exit.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
uring_switch_for() {
	[[ ",$1," == *,io_uring=1,* ]] || return 0
	[ -w "$URING_PARAM" ] || { echo "$(basename "$0"): io_uring=1 needs $URING_PARAM (Linux 6.14 or later, as root)." >&2; exit 1; }
	uring_before=$(cat "$URING_PARAM")
	cleanup_uring() {
		echo "$uring_before" >"$URING_PARAM"
		cleanup
	}
	trap cleanup_uring EXIT
	echo Y >"$URING_PARAM"
}

# cache_files_in_order CACHE ORDER: the cache's own file of each path in
# ORDER (one dataset path per line), in that order: the native baseline of a
# read through the mount.
cache_files_in_order() {
	sqlite3 -separator ' ' "$1/index.db" 'SELECT path, name FROM entries' | python3 -c '
import sys
cache, order = sys.argv[1], sys.argv[2]
names = dict(line.split(" ", 1) for line in sys.stdin.read().splitlines())
for p in open(order).read().split():
    n = names[p]
    print("%s/data/%s/%s" % (cache, n[:2], n))' "$1" "$2"
}

# keep_min NAME VALUE: best[NAME] = min(best[NAME], VALUE) (the best of rounds).
declare -A best
keep_min() {
	if [ -z "${best[$1]:-}" ] || awk "BEGIN {exit !($2 < ${best[$1]})}"; then best[$1]=$2; fi
}
# mbps SECONDS BYTES: MiB/s.
mbps() { awk "BEGIN {printf \"%.0f\", $2 / $1 / 1048576}"; }

now() { date +%s.%N; }
since() { awk "BEGIN {printf \"%.3f\", $(now) - $1}"; }
ratio() { awk "BEGIN {printf \"%.2f\", $1 / $2}"; }
# drop_caches: empties the page cache, and with DROP=3 (the default) also
# the dentries and inodes, so a mount's LOOKUPs reach the daemon again;
# DROP=1 drops the pages only, as memory pressure on a long job does first.
drop_caches() { sync; echo "${DROP:-3}" >/proc/sys/vm/drop_caches; }
stat_of() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1], "rb", buffering=0))
for k in sys.argv[2].split("."): v = v[k]
print(v)' "$MNT/.stats" "$1"; }
