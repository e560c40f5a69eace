#!/usr/bin/env bash
# FUSE over io_uring (io_uring=1): requests and replies travel through
# io_uring queues instead of /dev/fuse.  The bytes of misses (answered from
# the source pool), of first hits after a remount (checked by the daemon),
# of passthrough hits and of a large file's block reads must be the
# source's, .stats must say that io_uring serves, passthrough must still
# work, and unmount must end the daemon cleanly.  With the kernel's switch
# (/sys/module/fuse/parameters/enable_uring) off, the mount must fail with
# the sentence that names the fix and leave nothing mounted.
#
# The switch is system-wide: each test sets the value it needs and the
# previous value is written back when the script ends, whatever happens.
# Needs root, a kernel with FUSE over io_uring and a dlcache built with
# libfuse >= 3.18 (tests/build.sh's default where Debian offers it); the
# build against the system's libfuse 3.14 skips these tests.
. "$(dirname "$0")/lib.sh"

PARAM=/sys/module/fuse/parameters/enable_uring
libfuse=$("$DLCACHE" --version | sed -n 's/.*(libfuse \([0-9.]*\)).*/\1/p')
if [ "$(printf '%s\n3.18\n' "$libfuse" | sort -V | head -n 1)" != 3.18 ]; then
	echo "SKIP: this dlcache is built with libfuse ${libfuse:-unknown}, which has no FUSE over io_uring (3.18 or later; tests/build.sh builds one)"
	exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "SKIP: switching FUSE over io_uring on needs root"; exit 77; }
[ -w "$PARAM" ] || { echo "SKIP: this kernel has no FUSE over io_uring ($PARAM is missing)"; exit 77; }

PARAM_BEFORE=$(cat "$PARAM")
restore_param() {
	echo "$PARAM_BEFORE" >"$PARAM"
}
CLEANUP_HOOKS+=(restore_param)

# 40 files of 20-60 KB in train/n*/, and one of 3 MiB read by blocks.
make_dataset "$SRC" 4 10 40000
head -c $((3 << 20)) /dev/urandom >"$SRC/big.bin"

# Reads every file of train/ whole, and big.bin by 256 KiB ranges out of
# order, and compares each with the source.
read_and_compare() {
	read_all_shuffled >/dev/null || fail "train/: $1: bytes differ from the source"
	python3 - "$SRC/big.bin" "$MNT/big.bin" "$1" <<'PY' || fail "big.bin: $1: bytes differ from the source"
import random, sys
src, mnt, what = sys.argv[1:4]
want = open(src, "rb").read()
step = 256 << 10
offsets = list(range(0, len(want), step))
random.shuffle(offsets)
with open(mnt, "rb") as f:
    for off in offsets:
        f.seek(off)
        if f.read(step) != want[off:off + step]:
            sys.exit("FAIL: big.bin at %d" % off)
PY
}

test_io_uring_serves_misses_and_hits_with_the_source_bytes() {
	echo Y >"$PARAM"
	start_daemon "io_uring=1,cache_max_file=1M"
	read_and_compare "misses"
	expect_eq "misses" "$(stat_value misses)" 40
	drop_caches
	read_and_compare "passthrough hits of files this mount wrote"
	# 40 small files and big.bin, whose blocks are all in: passed through whole.
	expect_eq "hits_passthrough of files this mount wrote" "$(stat_value hits_passthrough)" 41
	stop_daemon
	start_daemon "io_uring=1,cache_max_file=1M"
	read_and_compare "first hits"
	drop_caches
	read_and_compare "passthrough hits"
	# big.bin is checked whole at its first open, then passed through.
	expect_eq "hits" "$(stat_value hits)" 82
	# Passthrough works over io_uring: the second pass's hits all passed through.
	expect_eq "hits_passthrough" "$(stat_value hits_passthrough)" 42
	expect_eq "fuse.io_uring" "$(stat_value fuse.io_uring)" true
	local ring dev
	ring=$(stat_value fuse.opens_io_uring)
	dev=$(stat_value fuse.opens_dev_fuse)
	# 2 passes of 41 files and this .stats; only opens racing the queues'
	# start at INIT may have come through /dev/fuse.
	[ "$ring" -ge 80 ] || fail "only $ring OPENs came through io_uring ($dev through /dev/fuse)"
	# Turning the switch off does not disturb a mount whose queues run.
	echo N >"$PARAM"
	read_and_compare "hits after the switch went off"
	stop_daemon
}

test_io_uring_0_uses_dev_fuse_while_the_switch_is_on() {
	echo Y >"$PARAM"
	start_daemon
	read_and_compare "misses"
	expect_eq "fuse.io_uring" "$(stat_value fuse.io_uring)" false
	expect_eq "fuse.opens_io_uring" "$(stat_value fuse.opens_io_uring)" 0
	stop_daemon
}

test_io_uring_1_fails_while_the_kernel_switch_is_off() {
	local rc=0
	echo N >"$PARAM"
	"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE,io_uring=1" 2>"$WORK/err" || rc=$?
	[ "$rc" -ne 0 ] || fail "io_uring=1 mounted with $PARAM at N"
	mountpoint -q "$MNT" && fail "io_uring=1 left a mount behind with $PARAM at N"
	grep -qF "echo Y > $PARAM" "$WORK/err" ||
		fail "the error does not name the fix: $(cat "$WORK/err")"
	[ "$(grep -c . "$WORK/err")" -eq 1 ] || fail "more than one line of error: $(cat "$WORK/err")"
	expect_eq "$PARAM after the refused mount" "$(cat "$PARAM")" N
}

run_tests
