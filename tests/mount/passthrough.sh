#!/usr/bin/env bash
# FUSE passthrough (passthrough=1): warm hits on checked cache files are read
# by the kernel from the cache file.  The bytes must be the source's, the
# kernel's rule that a passthrough open and a daemon-served open of one file
# never mix must hold (an open of the wrong kind fails with EIO), and a file
# evicted under a live passthrough open must still read right.  Needs a
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
	read_all_shuffled >/dev/null        # first hits: read whole and checked by the daemon
	expect_eq "hits_passthrough after the checking pass" "$(stat_value hits_passthrough)" 0
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
	python3 - "$SRC" "$MNT" <<PY || fail "mixed opens of one file"
$PY_HELPERS
rel = files()[0]
path = os.path.join(mnt, rel)
with open(path, "rb") as f:                       # a miss: admitted
    expect_bytes("miss", f.read(), rel)
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
for _ in range(2):                                # miss, then the checking first hit
    with open(path, "rb") as f:
        expect_bytes("warm-up", f.read(), rel)
drop_caches()
held = os.open(path, os.O_RDONLY)
expect_bytes("passthrough open", read_fd(held), rel)
if stats()["hits_passthrough"] != 1:
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

run_tests
