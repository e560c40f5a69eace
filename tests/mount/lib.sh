# lib.sh - shared by the mount tests: a temporary dataset, a real dlcache
# daemon in the foreground, and cleanup that unmounts even when a test fails.
#
# Each test script sources this file, defines test_* functions and ends with
# run_tests.  $DLCACHE is the binary under test (meson sets it).  A test that
# mounts another kind of source sets DLC_SOURCE (default: $SRC); one that
# starts a helper process adds a function to CLEANUP_HOOKS to stop it.

set -euo pipefail

: "${DLCACHE:?DLCACHE must name the dlcache binary}"
[ -c /dev/fuse ] || { echo "SKIP: /dev/fuse is missing"; exit 77; }
command -v fusermount3 >/dev/null || { echo "SKIP: fusermount3 is missing"; exit 77; }

WORK=$(mktemp -d /tmp/dlcache-test.XXXXXX)
SRC=$WORK/src
MNT=$WORK/mnt
CACHE=$WORK/cache
LOG=$WORK/daemon.log
DAEMON_PID=
ALLOWED_LOG='^$'          # extended regex of daemon stderr lines a test expects
mkdir -p "$SRC" "$MNT"

. "$(dirname "${BASH_SOURCE[0]}")/../debian_python.sh"
debian_python_first "$WORK/bin"
dlcache_package_first "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

cleanup() {
	local rc=$?
	# Every step runs whatever the one before returned: a hook stopped
	# early would leave helper processes holding the test's output open.
	set +e
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	for m in "${EXTRA_MOUNTS[@]:-}"; do
		[ -n "$m" ] && mountpoint -q "$m" 2>/dev/null && umount -l "$m" 2>/dev/null
	done
	for hook in "${CLEANUP_HOOKS[@]:-}"; do
		[ -n "$hook" ] && "$hook"
	done
	rm -rf "$WORK"
	exit $rc
}
EXTRA_MOUNTS=()
CLEANUP_HOOKS=()
trap cleanup EXIT
# A test killed by meson's timeout or by ^C cleans up too.
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
	echo "FAIL: $*" >&2
	if [ -s "$LOG" ]; then
		echo "--- daemon log ---" >&2
		tail -n 20 "$LOG" >&2
	fi
	exit 1
}

# make_dataset DIR CLASSES FILES_PER_CLASS MEAN_SIZE: an ImageFolder-shaped tree
# of random bytes, sizes spread around MEAN_SIZE; deterministic per DIR name.
make_dataset() {
	python3 - "$@" <<'PY'
import os, random, sys
root, classes, per, mean = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(root)
for c in range(classes):
    d = os.path.join(root, "train", "n%08d" % c)
    os.makedirs(d, exist_ok=True)
    for i in range(per):
        size = max(1, int(rng.uniform(0.5, 1.5) * mean))
        with open(os.path.join(d, "n%08d_%d.JPEG" % (c, i)), "wb") as f:
            f.write(rng.randbytes(size))
PY
}

# start_daemon [MOUNT OPTIONS]: mounts $DLC_SOURCE (default $SRC) on $MNT in
# the foreground with a cache in $CACHE and waits until the mount answers.
start_daemon() {
	start_daemon_from "${DLC_SOURCE:-$SRC}" "${1:-}"
}

# start_daemon_from SOURCE [MOUNT OPTIONS]: the same with another source.
start_daemon_from() {
	local opts="cache_dir=$CACHE,log_level=warning${2:+,$2}"
	"$DLCACHE" mount "$1" "$MNT" -f -o "$opts" 2>>"$LOG" &
	DAEMON_PID=$!
	wait_mounted
}

# Polled every 20 ms: a mount is ready in a few tenths of a second, and
# the suites mount hundreds of times.
wait_mounted() {
	for _ in $(seq 1 1500); do
		if mountpoint -q "$MNT" && [ -e "$MNT/.stats" ]; then
			return 0
		fi
		if [ -n "$DAEMON_PID" ] && ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			fail "the daemon exited before the mount was ready"
		fi
		sleep 0.02
	done
	fail "the mount did not become ready in 30 s"
}

# stop_daemon: unmounts, waits for the daemon, and fails on a non-zero exit or
# on any stderr line the test did not allow.
stop_daemon() {
	local rc=0
	fusermount3 -u "$MNT" || fail "fusermount3 -u failed"
	if [ -n "$DAEMON_PID" ]; then
		wait "$DAEMON_PID" || rc=$?
		DAEMON_PID=
	fi
	[ "$rc" -eq 0 ] || fail "the daemon exited with status $rc"
	check_log
}

check_log() {
	local bad
	bad=$(grep -Ev "$ALLOWED_LOG" "$LOG" || true)
	[ -z "$bad" ] || fail "unexpected daemon output: $bad"
	: >"$LOG"
}

# stat_value PATH.TO.KEY: one member of $MNT/.stats ("hits", "cache.entries").
stat_value() {
	python3 - "$MNT/.stats" "$1" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    value = value[part]
print(str(value).lower() if isinstance(value, bool) else value)
PY
}

# drop_caches: empties the kernel's page, dentry and inode caches, so that
# reads reach the daemon; where /proc/sys is read-only this does nothing.
drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

expect_eq() {   # expect_eq WHAT ACTUAL EXPECTED
	[ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}

# read_all_shuffled: reads every file under $MNT/train once in random order
# and compares it with $SRC; prints the number of files.
read_all_shuffled() {
	python3 - "$SRC" "$MNT" <<'PY'
import os, random, sys
src, mnt = sys.argv[1], sys.argv[2]
paths = []
for d, _, files in os.walk(os.path.join(src, "train")):
    paths += [os.path.relpath(os.path.join(d, f), src) for f in files]
random.shuffle(paths)
for p in paths:
    with open(os.path.join(mnt, p), "rb") as a, open(os.path.join(src, p), "rb") as b:
        if a.read() != b.read():
            sys.exit("bytes differ: " + p)
print(len(paths))
PY
}

# control TEXT: writes TEXT to $MNT/.control in one write(2) and closes it;
# prints "ok" or the errno name of the write or the close.  (Python's
# buffered files write again at close after a failed write, so use the raw
# calls; surrogateescape lets a test send bytes that are not UTF-8.)
control() {
	python3 - "$MNT/.control" "$1" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, sys.argv[2].encode("utf-8", "surrogateescape"))
    os.close(fd)
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
    try:
        os.close(fd)
    except OSError:
        pass
PY
}

# watch_cache_start SECONDS: in the background, for at most SECONDS or until
# watch_cache_stop, sums the bytes of the files under $CACHE/tmp and
# $CACHE/data/XX (as charged: whole 4 KiB blocks), scan after scan.  One scan
# of 257 directories is not one moment (a file deleted early in it and its
# successor written late would both count), so only files seen in two scans
# in a row count: each existed from its first sighting to its second, and
# every such span contains the moment between the scans.  A file is known by
# inode and ctime, so a recycled inode is another file, and one renamed from
# tmp/ into data/ counts once.
watch_cache_start() {
	rm -f "$WORK/stop-watch"
	python3 - "$CACHE" "$1" "$WORK/stop-watch" >"$WORK/watch" <<'PY' &
import os, sys, time
cache, seconds, stop_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
peak = samples = 0
stop = time.time() + seconds
dirs = [os.path.join(cache, "tmp")] + [os.path.join(cache, "data", "%02x" % i) for i in range(256)]
previous = {}
while time.time() < stop and not os.path.exists(stop_file):
    seen = {}
    for d in dirs:
        try:
            for e in os.scandir(d):
                try:
                    st = e.stat()
                except FileNotFoundError:
                    continue
                seen[(st.st_ino, st.st_ctime_ns)] = (st.st_size + 4095) // 4096 * 4096
        except FileNotFoundError:
            pass
    total = sum(size for key, size in seen.items() if key in previous)
    previous = seen
    peak = max(peak, total)
    samples += 1
print(peak, samples)
PY
	CACHE_WATCHER=$!
}

# watch_cache_stop: stops the watcher and sets WATCH_PEAK (the most bytes of
# one moment) and WATCH_SAMPLES (the scans it made).
watch_cache_stop() {
	touch "$WORK/stop-watch"
	wait "$CACHE_WATCHER" || fail "the cache watcher failed"
	read -r WATCH_PEAK WATCH_SAMPLES <"$WORK/watch"
}

# run_tests: runs every test_* function; "ok NAME (N s)" names the slow ones
# in CI logs.
run_tests() {
	local t start
	for t in $(declare -F | awk '{print $3}' | grep '^test_'); do
		echo "== $t"
		start=$SECONDS
		"$t"
		if mountpoint -q "$MNT"; then
			stop_daemon
		fi
		rm -rf "$CACHE"
		echo "ok $t ($((SECONDS - start)) s)"
	done
}
