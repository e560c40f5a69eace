#!/usr/bin/env bash
# Namespace and bytes: what a training job sees through the mount.
. "$(dirname "$0")/lib.sh"

make_dataset "$SRC" 8 40 20000
mkdir -p "$SRC/empty dir" "$SRC/ünïcode name"
echo "hello" >"$SRC/ünïcode name/a file.txt"
ln -s train/n00000000/n00000000_0.JPEG "$SRC/link"
ln -s /etc/passwd "$SRC/outside"
NFILES=$(find "$SRC" -type f | wc -l)

test_a_path_too_long_for_a_snapshot_is_left_out_not_the_mount() {
	# 17 directories of 250 bytes: the deepest ones pass 4096 bytes.
	python3 - "$SRC" <<'PY'
import os, sys
os.chdir(sys.argv[1])
os.mkdir("deep")
os.chdir("deep")
for level in range(17):
    name = ("%02d" % level) + "d" * 248
    os.mkdir(name)
    os.chdir(name)
    open("file", "w").write("level %d\n" % level)
PY
	ALLOWED_LOG="a path of [0-9]+ bytes, over the 4095 a snapshot holds, is left out"
	start_daemon
	expect_eq "a shallow file under the long paths" "$(cat "$MNT/deep/00$(printf 'd%.0s' $(seq 248))/file")" "level 0"
	local kept
	kept=$(find "$MNT/deep" -name file 2>/dev/null | wc -l)
	[ "$kept" -ge 10 ] && [ "$kept" -lt 17 ] || fail "files kept under deep/: $kept"
	expect_eq "the rest of the dataset" "$(read_all_shuffled)" 320
	expect_eq "warnings" "$(grep -c "a snapshot holds, is left out" "$LOG")" 1
	stop_daemon
	ALLOWED_LOG='^$'
	rm -rf "$SRC/deep" 2>/dev/null || python3 -c 'import shutil, sys; shutil.rmtree(sys.argv[1])' "$SRC/deep"
}

test_two_epochs_are_byte_identical_and_the_second_hits() {
	start_daemon
	expect_eq "files read in epoch 1" "$(read_all_shuffled)" 320
	expect_eq "misses after epoch 1" "$(stat_value misses)" 320
	expect_eq "hits after epoch 1" "$(stat_value hits)" 0
	expect_eq "admissions" "$(stat_value admissions)" 320
	# Drop the kernel's page cache so that epoch 2 really asks the daemon.
	drop_caches
	expect_eq "files read in epoch 2" "$(read_all_shuffled)" 320
	expect_eq "hits after epoch 2" "$(stat_value hits)" 320
	expect_eq "misses after epoch 2" "$(stat_value misses)" 320
	expect_eq "remote opens" "$(stat_value remote_ops.open)" 320
}

test_walking_and_stating_the_tree_makes_no_remote_metadata_call() {
	start_daemon
	local native mounted
	native=$(cd "$SRC" && find . -printf '%y %s %m %T@ %p\n' | sort)
	mounted=$(cd "$MNT" && find . -printf '%y %s %m %T@ %p\n' | sort)
	# The mount is read-only: write bits are cleared, nothing else differs.
	native=$(echo "$native" | python3 -c '
import sys
for line in sys.stdin:
    y, s, m, t, p = line.rstrip("\n").split(" ", 4)
    print(y, s, oct(int(m, 8) & ~0o222)[2:], t, p)')
	[ "$native" = "$mounted" ] || fail "find differs: $(diff <(echo "$native") <(echo "$mounted") | head)"
	find "$MNT" -exec stat {} + >/dev/null
	ls -laR "$MNT" >/dev/null
	expect_eq "remote metadata calls" "$(stat_value remote_ops.metadata)" 0
	expect_eq "remote list calls" "$(stat_value remote_ops.list)" 0
	expect_eq "remote stat calls" "$(stat_value remote_ops.stat)" 0
	expect_eq "snapshot entries" "$(stat_value snapshot.entries)" "$(find "$SRC" | wc -l)"
}

test_stats_file_is_reachable_by_name_but_hidden_from_listings() {
	start_daemon
	ls -a "$MNT" | grep -x '.stats' >/dev/null && fail ".stats appears in the root listing"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$MNT/.stats" || fail ".stats is not JSON"
	"$DLCACHE" stat "$MNT" | grep -E 'hit.ratio' >/dev/null || fail "dlcache stat does not print a hit ratio"
	"$DLCACHE" stat "$MNT" --json | python3 -c 'import json,sys; json.load(sys.stdin)' || fail "dlcache stat --json is not JSON"
}

test_symlinks_are_links_and_outside_targets_are_never_followed() {
	start_daemon
	expect_eq "readlink" "$(readlink "$MNT/link")" "train/n00000000/n00000000_0.JPEG"
	cmp "$MNT/link" "$SRC/train/n00000000/n00000000_0.JPEG" || fail "reading through an inner link"
	expect_eq "outside link target" "$(readlink "$MNT/outside")" "/etc/passwd"
	[ -L "$MNT/outside" ] || fail "outside is not shown as a link"
}

test_names_with_spaces_and_unicode_and_empty_dirs() {
	start_daemon
	expect_eq "unicode file" "$(cat "$MNT/ünïcode name/a file.txt")" "hello"
	expect_eq "empty dir listing" "$(ls -A "$MNT/empty dir" | wc -l)" 0
	[ -d "$MNT/empty dir" ] || fail "empty dir is not a directory"
}

test_missing_names_and_wrong_kinds_give_the_right_errno() {
	start_daemon
	python3 - "$MNT" <<'PY' || fail "errno checks"
import errno, os, sys
m = sys.argv[1]
def expect(e, f, *a):
    try:
        f(*a)
    except OSError as x:
        assert x.errno == e, (f, a, x)
        return
    raise AssertionError(("no error", f, a))
expect(errno.ENOENT, os.stat, m + "/nope")
expect(errno.ENOENT, os.stat, m + "/train/nope/x")
expect(errno.ENOTDIR, os.listdir, m + "/train/n00000000/n00000000_0.JPEG")
expect(errno.EISDIR, lambda: open(m + "/train", "rb").read())
PY
	local fsfiles
	fsfiles=$(stat -f -c %c "$MNT")
	expect_eq "statfs files" "$fsfiles" "$(find "$SRC" | wc -l)"
}

test_concurrent_readers_of_one_missing_file_share_one_fetch() {
	start_daemon "source_delay=300ms"
	local f=train/n00000001/n00000001_3.JPEG pids=()
	for _ in $(seq 8); do
		cmp "$MNT/$f" "$SRC/$f" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader got wrong bytes"; done
	expect_eq "remote opens for 8 concurrent readers" "$(stat_value remote_ops.open)" 1
	expect_eq "bytes from remote" "$(stat_value bytes_from_remote)" "$(stat -c %s "$SRC/$f")"
}

test_large_files_read_correctly_by_range() {
	head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$SRC/shard.tar"
	start_daemon "cache_max_file=1M,refresh"
	cmp "$MNT/shard.tar" "$SRC/shard.tar" || fail "large file bytes"
	python3 - "$MNT/shard.tar" "$SRC/shard.tar" <<'PY' || fail "random ranges of a large file"
import os, random, sys
a, b = open(sys.argv[1], "rb", buffering=0), open(sys.argv[2], "rb")
size = os.path.getsize(sys.argv[2])
for _ in range(200):
    off = random.randrange(size + 10)
    n = random.randrange(1, 300000)
    a.seek(off); b.seek(off)
    assert a.read(n) == b.read(n), (off, n)
PY
	# Above cache_max_file a file is cached by blocks (tests/mount/blocks.sh):
	# one entry, its 2 blocks of 4 MiB written once.
	expect_eq "large file cached as one entry" "$(stat_value cache.entries)" 1
	expect_eq "blocks written" "$(stat_value block_admissions)" 2
	rm -f "$SRC/shard.tar"
}


# Every miss lands in a buffer as large as the file.  This VM pays ~20 us
# to touch a page for the first time, so a buffer taken from fresh memory
# costs more than the read (a 200 KB file: 50 faults, 1 ms); the daemon's
# heaps must keep memory they were given back (main.c, M_TRIM_THRESHOLD).
# Counted in page faults, not timed: about 50 per file when the heap hands
# its top back to the system after every free, none when it keeps it.
test_misses_reuse_the_daemons_memory_instead_of_faulting_in_fresh_pages() {
	mkdir -p "$SRC/mem"
	for i in $(seq 1 150); do head -c 200000 /dev/urandom >"$SRC/mem/f$i"; done
	start_daemon "refresh"
	cat "$MNT/mem/f1" >/dev/null   # the first miss may grow the heap
	local before after
	before=$(awk '{print $10}' "/proc/$DAEMON_PID/stat")
	for i in $(seq 2 150); do cmp -s "$MNT/mem/f$i" "$SRC/mem/f$i" || fail "bytes of mem/f$i"; done
	after=$(awk '{print $10}' "/proc/$DAEMON_PID/stat")
	expect_eq "misses" "$(stat_value misses)" 150
	[ $((after - before)) -lt $((149 * 5)) ] ||
		fail "149 misses of 200 KB took $((after - before)) page faults in the daemon (fewer than 5 per miss expected)"
	stop_daemon
	rm -rf "$SRC/mem"
}
# Under the sanitizers (tests/sanitize.sh) malloc is ASan's, whose quarantine
# keeps freed memory out of use on purpose: the count is the main build's.
[ -z "${DLC_SANITIZE:-}" ] || unset -f test_misses_reuse_the_daemons_memory_instead_of_faulting_in_fresh_pages

run_tests
