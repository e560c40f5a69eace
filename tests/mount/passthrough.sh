#!/usr/bin/env bash
# FUSE passthrough (passthrough=1): hits on cache files this mount wrote or
# checked are read by the kernel from the cache file.  The bytes must be the source's, the
# kernel's rule that a passthrough open and a daemon-served open of one file
# never mix must hold (an open of the wrong kind fails with EIO), and a file
# evicted under a live passthrough open must still read right.  A checked
# entry's backing id stays registered across opens (cache.passthrough_backing)
# until the entry is dropped: then it must be closed, or the kernel would hold
# the evicted file's disk space, and a replaced or corrupted entry must not be
# read through the old id.  Needs a
# dlcache built with libfuse >= 3.17 (tests/build.sh's default) and root; the
# build against the system's libfuse 3.14 skips these tests.
. "$(dirname "$0")/lib.sh"

libfuse=$("$DLCACHE" --version | sed -n 's/.*(libfuse \([0-9.]*\)).*/\1/p')
if [ "$(printf '%s\n3.17\n' "$libfuse" | sort -V | head -n 1)" != 3.17 ]; then
	echo "SKIP: this dlcache is built with libfuse ${libfuse:-unknown}, which has no passthrough (3.17 or later; tests/build.sh builds one)"
	exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "SKIP: passthrough backing files need root"; exit 77; }

# 40 files of 20-60 KB in train/n*/.
make_dataset "$SRC" 4 10 40000

# python3 SCRIPT ARGS: the scripts below share these helpers.
PY_HELPERS='
import json, os, sys
src, mnt = sys.argv[1], sys.argv[2]
def stats():
    with open(os.path.join(mnt, ".stats")) as f:
        return json.load(f)
def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
def read_fd(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = b""
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return out
        out += b
def expect_bytes(what, got, rel):
    with open(os.path.join(src, rel), "rb") as f:
        if got != f.read():
            sys.exit("FAIL: %s: the bytes of %s differ from the source" % (what, rel))
def held_bytes(cache):
    # Space the cache file system uses beyond its linked files: unlinked
    # files something still holds open (a backing id not closed).
    st = os.statvfs(cache)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    linked = 0
    for d, dirs, names in os.walk(cache):
        for n in dirs + names:
            linked += os.lstat(os.path.join(d, n)).st_blocks * 512
    return used - linked
def read_file(rel):
    with open(os.path.join(mnt, rel), "rb") as f:
        expect_bytes("read", f.read(), rel)
def wait_for(what, cond):
    # RELEASE reaches the daemon a little after close(2).
    import time
    for _ in range(100):
        if cond():
            return
        time.sleep(0.05)
    sys.exit("FAIL: %s" % what)
def read_until_passed(rel):
    # Reads rel until one open passes through: an open right after a
    # daemon-served one may be declined, its RELEASE not seen yet.
    before = stats()["hits_passthrough"]
    wait_for("%s never passed through" % rel,
             lambda: read_file(rel) or stats()["hits_passthrough"] > before)
def files():
    out = []
    for d, _, names in os.walk(os.path.join(src, "train")):
        out += [os.path.relpath(os.path.join(d, n), src) for n in names]
    return sorted(out)
'

test_warm_hits_pass_through_and_serve_the_source_bytes() {
	start_daemon
	expect_eq "cache.passthrough" "$(stat_value cache.passthrough)" true
	read_all_shuffled >/dev/null        # misses, admitted
	drop_caches
	read_all_shuffled >/dev/null        # files this mount wrote: passthrough at once
	expect_eq "hits_passthrough of files written by this mount" "$(stat_value hits_passthrough)" 40
	expect_eq "passthrough_declined" "$(stat_value passthrough_declined)" 0
	expect_eq "hits" "$(stat_value hits)" 40
	# The next mount trusts no file it has not read and checked itself.
	stop_daemon
	start_daemon
	read_all_shuffled >/dev/null        # first hits: read whole and checked by the daemon
	expect_eq "hits_passthrough after the checking pass" "$(stat_value hits_passthrough)" 0
	expect_eq "hits of the checking pass" "$(stat_value hits)" 40
	drop_caches
	read_all_shuffled >/dev/null        # warm hits: passthrough opens
	expect_eq "hits_passthrough" "$(stat_value hits_passthrough)" 40
	expect_eq "passthrough_declined" "$(stat_value passthrough_declined)" 0
	expect_eq "hits" "$(stat_value hits)" 80
	# And again from the page cache of the cache files.
	read_all_shuffled >/dev/null
	expect_eq "hits_passthrough, page cache warm" "$(stat_value hits_passthrough)" 80
}

test_passthrough_0_serves_every_hit_from_the_daemon() {
	start_daemon "passthrough=0"
	expect_eq "cache.passthrough" "$(stat_value cache.passthrough)" false
	read_all_shuffled >/dev/null
	read_all_shuffled >/dev/null
	drop_caches
	read_all_shuffled >/dev/null
	expect_eq "hits_passthrough" "$(stat_value hits_passthrough)" 0
	expect_eq "hits" "$(stat_value hits)" 80
}

# A first hit (the daemon reads and checks the cache file, page cache in use)
# is open while the same file is opened again: the second open is a checked
# hit, but must be served by the daemon too; once both are closed the next
# open passes through.
test_a_hit_during_a_daemon_served_open_of_the_same_file_is_served_by_the_daemon() {
	start_daemon
	read_all_shuffled >/dev/null        # misses, admitted
	stop_daemon
	start_daemon                        # a new mount checks each file on its first hit
	python3 - "$SRC" "$MNT" <<PY || fail "mixed opens of one file"
$PY_HELPERS
rel = files()[0]
path = os.path.join(mnt, rel)
first = os.open(path, os.O_RDONLY)                # first hit: daemon-served, checked
expect_bytes("first hit", read_fd(first), rel)
s = stats()
if s["hits_passthrough"] != 0:
    sys.exit("FAIL: the first hit passed through")
second = os.open(path, os.O_RDONLY)               # a checked hit while the first is open
drop_caches()
expect_bytes("hit beside a daemon-served open", read_fd(second), rel)
expect_bytes("daemon-served open, read again", read_fd(first), rel)
s = stats()
if s["hits_passthrough"] != 0 or s["passthrough_declined"] != 1:
    sys.exit("FAIL: expected the second open declined, got %d passthrough, %d declined"
             % (s["hits_passthrough"], s["passthrough_declined"]))
os.close(first)
os.close(second)
# RELEASE is asynchronous: the daemon may see it a little after close(2).
import time
for _ in range(50):
    third = os.open(path, os.O_RDONLY)
    expect_bytes("hit after both closed", read_fd(third), rel)
    os.close(third)
    if stats()["hits_passthrough"] > 0:
        break
    time.sleep(0.1)
else:
    sys.exit("FAIL: no passthrough open once the daemon-served ones were closed")
PY
}

# A passthrough open stays live while its file is evicted (lru, a small
# cache) and opened again as a miss: the live open keeps reading the checked
# cache file, the new one is served by the daemon (direct I/O, which the
# kernel allows beside passthrough), both with the source's bytes.
test_eviction_under_a_live_passthrough_open_keeps_the_bytes_right() {
	start_daemon "policy=lru,cache_size=256K"
	python3 - "$SRC" "$MNT" "$CACHE" <<PY || fail "eviction under a passthrough open"
$PY_HELPERS
rel = files()[0]
path = os.path.join(mnt, rel)
read_file(rel)                                    # a miss, admitted
read_until_passed(rel)                            # written by this mount: passes through
drop_caches()
before = stats()["hits_passthrough"]
held = os.open(path, os.O_RDONLY)
expect_bytes("passthrough open", read_fd(held), rel)
if stats()["hits_passthrough"] != before + 1:
    sys.exit("FAIL: the warm hit did not pass through")
evictions = stats()["evictions"]
for other in files()[1:]:                         # misses that push it out (lru)
    with open(os.path.join(mnt, other), "rb") as f:
        expect_bytes("miss", f.read(), other)
s = stats()
with open(os.path.join(mnt, ".cached")) as f:
    cached = f.read().split("\n")
if s["evictions"] == evictions or "/" + rel in cached or rel in cached:
    sys.exit("FAIL: %s was not evicted (%d evictions)" % (rel, s["evictions"]))
drop_caches()
expect_bytes("live passthrough open after eviction", read_fd(held), rel)
again = os.open(path, os.O_RDONLY)                # a miss beside the live passthrough open
expect_bytes("miss beside a passthrough open", read_fd(again), rel)
expect_bytes("live passthrough open, read again", read_fd(held), rel)
os.close(again)
os.close(held)
with open(path, "rb") as f:
    expect_bytes("after both closed", f.read(), rel)
PY
}

test_a_kept_backing_id_serves_later_opens_without_registering_again() {
	start_daemon
	read_all_shuffled >/dev/null        # misses
	expect_eq "backing ids before any passthrough open" "$(stat_value cache.passthrough_backing)" 0
	drop_caches
	read_all_shuffled >/dev/null        # passthrough opens: each registers its entry
	expect_eq "backing ids kept once every file is closed" "$(stat_value cache.passthrough_backing)" 40
	drop_caches
	read_all_shuffled >/dev/null        # the kept ids again
	expect_eq "hits_passthrough counts every open" "$(stat_value hits_passthrough)" 80
	expect_eq "backing ids after a second pass" "$(stat_value cache.passthrough_backing)" 40
	expect_eq "passthrough_declined" "$(stat_value passthrough_declined)" 0
}

# Capacity: every entry is read to a kept backing id, then evicted by the
# next ones (lru, a 256 KiB cache on its own tmpfs); one is held open while
# evicted.  Once nothing is open, the tmpfs must use no more than its linked
# files (an evicted entry's id left registered keeps its unlinked file), the
# ids must be at most the entries, and the bytes the source's.
test_evicted_entries_release_their_backing_files_and_space() {
	mkdir -p "$CACHE"
	mount -t tmpfs -o size=8m,mode=0700 tmpfs "$CACHE" || { echo "SKIP: cannot mount tmpfs"; return 0; }
	EXTRA_MOUNTS+=("$CACHE")
	start_daemon "policy=lru,cache_size=256K"
	python3 - "$SRC" "$MNT" "$CACHE" <<PY || fail "backing ids of evicted entries"
$PY_HELPERS
cache = sys.argv[3]
names = files()
for rel in names:                  # miss, then a passthrough hit
    read_file(rel)
    read_until_passed(rel)
    s = stats()
    if s["cache"]["bytes"] > s["cache"]["capacity"]:
        sys.exit("FAIL: %d bytes cached over a capacity of %d" % (s["cache"]["bytes"], s["cache"]["capacity"]))
s = stats()
if s["hits_passthrough"] != len(names) or s["evictions"] < len(names) // 2:
    sys.exit("FAIL: %d passthrough hits, %d evictions" % (s["hits_passthrough"], s["evictions"]))
wait_for("%d bytes held by unlinked cache files" % held_bytes(cache),
         lambda: held_bytes(cache) < 16384)
wait_for("more backing ids than cache entries: %s" % stats()["cache"],
         lambda: 0 < stats()["cache"]["passthrough_backing"] <= stats()["cache"]["entries"])
# One entry held open by a passthrough open while it is evicted.
rel = names[0]
read_file(rel)
read_until_passed(rel)
held = os.open(os.path.join(mnt, rel), os.O_RDONLY)
expect_bytes("held passthrough open", read_fd(held), rel)
for other in names[1:16]:
    read_file(other)
    read_until_passed(other)
if "/" + rel in open(os.path.join(mnt, ".cached")).read().split("\n"):
    sys.exit("FAIL: %s was not evicted" % rel)
drop_caches()
expect_bytes("held open after its eviction", read_fd(held), rel)
os.close(held)
wait_for("%d bytes held once the evicted file was closed" % held_bytes(cache),
         lambda: held_bytes(cache) < 16384)
wait_for("more backing ids than cache entries: %s" % stats()["cache"],
         lambda: stats()["cache"]["passthrough_backing"] <= stats()["cache"]["entries"])
# Evicted, fetched again and re-admitted: a new file, the source's bytes.
read_file(rel)
read_until_passed(rel)
drop_caches()
read_file(rel)
PY
	stop_daemon
	umount "$CACHE"
}

# An entry with a kept backing id is corrupted on disk: the next open must
# not use the old id (the kernel would read the corrupted file) but drop the
# entry and serve the source's bytes; its id is closed.
test_a_corrupted_entry_is_not_read_through_its_kept_backing_id() {
	ALLOWED_LOG='cached copy of .* dropped'
	start_daemon
	python3 - "$SRC" "$MNT" "$CACHE" <<PY || fail "corrupted entry behind a kept id"
$PY_HELPERS
cache = sys.argv[3]
rel = files()[0]
read_file(rel)                     # miss, then a passthrough hit
read_until_passed(rel)
if stats()["cache"]["passthrough_backing"] != 1 or stats()["hits_passthrough"] != 1:
    sys.exit("FAIL: no kept backing id: %s" % stats()["cache"])
with open(os.path.join(src, rel), "rb") as f:
    want = f.read()
path = None
for d, _, names in os.walk(os.path.join(cache, "data")):
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            if f.read() == want:
                path = os.path.join(d, n)
if path is None:
    sys.exit("FAIL: no cache file holds %s" % rel)
with open(path, "r+b") as f:       # same size, other bytes
    data = f.read()
    f.seek(0)
    f.write(bytes(b ^ 0xFF for b in data[:4096]))
drop_caches()
read_file(rel)
s = stats()
if s["corrupt"] != 1 or s["cache"]["passthrough_backing"] != 0:
    sys.exit("FAIL: expected the entry dropped and its id closed: corrupt %d, %s"
             % (s["corrupt"], s["cache"]))
read_file(rel)                     # admitted again, then passed through
read_until_passed(rel)
drop_caches()
read_file(rel)
PY
	stop_daemon
	ALLOWED_LOG='^$'
}

# read_until_whole FILE WHAT: reads $MNT's FILE, page cache dropped, until
# an open is served whole (the last open's RELEASE may still be on its way:
# until it is seen, an open is served by the daemon, by blocks).
read_until_whole() {
	local i
	for i in $(seq 50); do
		drop_caches
		cmp "$MNT/$(basename "$1")" "$1" || fail "$2: bytes differ"
		[ "$(stat_value whole_block_opens)" -ge 1 ] && return 0
		sleep 0.1
	done
}

# A large file (read by blocks) passes through once all its blocks are in
# its data file: at once in the mount that wrote them, after a remount once
# its open has checked them.  A block damaged behind the cache is caught by
# that check, dropped (counted) and fetched again.  The bytes are the
# source's under whole, random, threaded and mmap reads.
test_a_complete_large_file_passes_through_once_its_blocks_are_checked() {
	ALLOWED_LOG='cached block .* dropped'
	local big=$WORK/big opts="cache_max_file=256K,block_size=1M" size=$((6 * 1024 * 1024 + 123))
	local i reads victim
	mkdir -p "$big"
	head -c "$size" /dev/urandom >"$big/shard.bin"
	start_daemon_from "$big" "$opts"
	cmp "$MNT/shard.bin" "$big/shard.bin" || fail "the first read differs"
	for i in $(seq 100); do    # blocks are written behind the reader
		[ "$(stat_value block_admissions)" -eq 7 ] && break
		sleep 0.1
	done
	expect_eq "blocks cached" "$(stat_value block_admissions)" 7
	reads=$(stat_value remote_ops.read)
	read_until_whole "$big/shard.bin" "a read in the mount that wrote the blocks"
	expect_eq "whole opens in the mount that wrote the blocks" "$(stat_value whole_block_opens)" 1
	expect_eq "passthrough hits" "$(stat_value hits_passthrough)" 1
	expect_eq "source reads once cached" "$(stat_value remote_ops.read)" "$reads"
	stop_daemon

	start_daemon_from "$big" "$opts"
	drop_caches
	python3 - "$MNT/shard.bin" "$big/shard.bin" <<'PY' || fail "reads after a remount differ"
import mmap, os, random, sys, threading
mnt, src = sys.argv[1], sys.argv[2]
want = open(src, "rb").read()
fd = os.open(mnt, os.O_RDONLY)
bad = []
def worker(seed):
    rng = random.Random(seed)
    for _ in range(500):
        off, n = rng.randrange(len(want) + 10), rng.choice([1, 4096, 100000])
        if os.pread(fd, n, off) != want[off:off + n]:
            bad.append(off)
threads = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
for t in threads: t.start()
for t in threads: t.join()
if bad:
    sys.exit("FAIL: %d preads differ, first at %d" % (len(bad), bad[0]))
with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
    if m[:] != want:
        sys.exit("FAIL: the mapped file differs")
os.close(fd)
PY
	expect_eq "source reads after a remount" "$(stat_value remote_ops.read)" 0
	expect_eq "whole opens after a remount (checked at open)" "$(stat_value whole_block_opens)" 1
	expect_eq "passthrough hits after a remount" "$(stat_value hits_passthrough)" 1
	expect_eq "corrupt" "$(stat_value corrupt)" 0
	stop_daemon

	# One byte of block 3 changed behind the cache.
	victim=$(find "$CACHE/data" -type f -size "${size}c" | head -n 1)
	[ -n "$victim" ] || fail "no data file of the shard's size in the cache"
	printf '\xff' | dd of="$victim" bs=1 seek=$((3 * 1024 * 1024 + 77)) conv=notrunc status=none
	cmp -s "$victim" "$big/shard.bin" && fail "the damage left the data file equal to the shard"
	start_daemon_from "$big" "$opts"
	drop_caches
	cmp "$MNT/shard.bin" "$big/shard.bin" || fail "bytes differ after a damaged block"
	expect_eq "corrupt" "$(stat_value corrupt)" 1
	expect_eq "blocks fetched again" "$(stat_value block_misses)" 1
	expect_eq "no whole open with a bad block" "$(stat_value whole_block_opens)" 0
	for i in $(seq 100); do
		[ "$(stat_value block_admissions)" -eq 1 ] && break
		sleep 0.1
	done
	read_until_whole "$big/shard.bin" "a read once the block was written again"
	expect_eq "whole open once the block is written again" "$(stat_value whole_block_opens)" 1
	stop_daemon
	ALLOWED_LOG='^$'
}

run_tests
