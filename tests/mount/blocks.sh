#!/usr/bin/env bash
# Files larger than cache_max_file, cached by blocks (src/read/blocks.c,
# src/cache/cache_blocks.c): bytes identical under sequential, random,
# parallel and mmap reads; a cached file read at random costs no source
# read; a corrupted block is refetched and counted; kill -9 mid-stream then
# a remount serves only correct bytes; the disk stays within cache_size.
# The same tests run over the two packed sources, whose members larger than
# cache_max_file are cached by blocks too (fetch_source.c's one read interface):
# a dlcache pack of the tree, and a tar shard indexed in place with
# dlcache snapshot --tar --merge.
. "$(dirname "$0")/lib.sh"

# Three shards of 12 MiB + 5 bytes (a short last block), 1 MiB blocks.
mkdir -p "$SRC/shards"
for i in 0 1 2; do
	head -c $((12 * 1024 * 1024 + 5)) /dev/urandom >"$SRC/shards/s$i.tfrecord"
done
SHARD_BYTES=$((12 * 1024 * 1024 + 5))
BLOCKS="cache_max_file=256K,block_size=1M,readahead_max=8M"

# The packed sources: both mount as the tree above (shards/s*.tfrecord).
PACKED=$WORK/packed
"$DLCACHE" pack "$SRC" "$PACKED" --chunk-size 4M >/dev/null 2>"$WORK/pack.err" ||
	fail "pack: $(cat "$WORK/pack.err")"
TARS=$WORK/tars
mkdir -p "$TARS"
tar --format=gnu -cf "$TARS/shard-000000.tar" -C "$SRC" shards
"$DLCACHE" snapshot --tar "$TARS" --merge >/dev/null 2>"$WORK/tar.err" ||
	fail "snapshot --tar: $(cat "$WORK/tar.err")"

# compare_ranges FILE COUNT SIZE [THREADS]: COUNT reads of SIZE bytes at
# random offsets (some across block boundaries and the end), from THREADS
# threads sharing one descriptor, each compared with the source.
compare_ranges() {
	python3 - "$MNT/shards/$1" "$SRC/shards/$1" "$2" "$3" "${4:-1}" <<'PY'
import os, random, sys, threading
mnt, src, count, size, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
length = os.path.getsize(src)
fd = os.open(mnt, os.O_RDONLY)
ref = open(src, "rb").read()
bad = []
def worker(seed):
    rng = random.Random(seed)
    for _ in range(count // threads):
        off = rng.randrange(0, length + 10)
        got = os.pread(fd, size, off)
        if got != ref[off:off + size]:
            bad.append(off)
ts = [threading.Thread(target=worker, args=(s,)) for s in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
os.close(fd)
if bad:
    sys.exit("%d reads differ from the source, first at offset %d" % (len(bad), bad[0]))
PY
}

cache_files_bytes() {
	find "$CACHE/data" "$CACHE/tmp" -type f -printf '%s\n' 2>/dev/null |
		awk '{s += int(($1 + 4095) / 4096) * 4096} END {print s + 0}'
}

test_sequential_random_parallel_and_mmap_reads_give_the_sources_bytes() {
	start_daemon "$BLOCKS,cache_size=100M"
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "sequential read differs"
	[ "$(stat_value readaheads)" -gt 0 ] || fail "a sequential reader got no readahead"
	expect_eq "blocks of s0 cached" "$(stat_value block_admissions)" 13
	compare_ranges s1.tfrecord 300 70000 || fail "random reads differ"
	compare_ranges s2.tfrecord 400 200000 4 || fail "parallel reads differ"
	python3 - "$MNT/shards/s2.tfrecord" "$SRC/shards/s2.tfrecord" <<'PY' || fail "mmap read differs"
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    assert m[:] == g.read(), "mmap bytes differ"
PY
	# Four readers streaming the same shard at once share its blocks.
	local r readers=()
	for r in 1 2 3 4; do
		cmp "$MNT/shards/s1.tfrecord" "$SRC/shards/s1.tfrecord" &
		readers+=($!)
	done
	for r in "${readers[@]}"; do wait "$r" || fail "a parallel stream differs"; done
	expect_eq "remote errors" "$(stat_value remote_errors)" 0
}

# The kernel reads a large file ahead in requests of up to 1 MiB once the
# mount raised its readahead window (kernel_readahead, 1 MiB by default,
# 128 KiB left alone); each reply is copied out of a
# buffer the daemon keeps for the next one.  A fresh 1 MiB buffer per
# request costs 256 page faults (malloc maps it anew each time): a 12 MiB
# pass, about 3100 faults in the daemon then, under 1000 now.
test_the_kernel_reads_large_files_in_large_requests_into_kept_buffers() {
	# The daemon serves the cached passes (a complete file would pass through).
	start_daemon "$BLOCKS,cache_size=100M,passthrough=0"
	local bdi before after
	bdi=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
	expect_eq "the mount's kernel readahead (KiB)" "$(cat "$bdi")" 1024
	cat "$MNT/shards/s0.tfrecord" >/dev/null
	drop_caches
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "first cached pass differs"
	drop_caches
	before=$(awk '{print $10}' "/proc/$DAEMON_PID/stat")
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "second cached pass differs"
	after=$(awk '{print $10}' "/proc/$DAEMON_PID/stat")
	[ $((after - before)) -lt 1000 ] ||
		fail "a cached pass of 12 MiB took $((after - before)) page faults in the daemon (under 1000 expected)"
	stop_daemon
	start_daemon "$BLOCKS,cache_size=100M,kernel_readahead=0"
	bdi=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
	expect_eq "the kernel's own readahead (KiB)" "$(cat "$bdi")" 128
}

# A stream through a cache too small for it: every block is read from the
# source once, although the kernel (its readahead raised to 4 MiB, four of
# these blocks) has two windows of requests in flight, answered in any
# order: a request behind the furthest one still finds its block in the
# reader's memory.  With two blocks kept and the old reordering bounds,
# 1.08-1.75x the file was read (four runs).
test_a_stream_the_cache_cannot_keep_reads_each_block_from_the_source_once() {
	start_daemon "$BLOCKS,cache_size=2M,kernel_readahead=4M"
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "bytes differ"
	local remote
	remote=$(stat_value bytes_from_remote)
	# At most one block more (seen once in five runs: a request later
	# still than two windows); the old bounds read 1.08-1.75x.
	[ "$remote" -le $((SHARD_BYTES + SHARD_BYTES / 10)) ] ||
		fail "the source sent $remote bytes for a file of $SHARD_BYTES (at most 1.1x expected)"
}

test_random_4k_reads_in_a_cached_file_make_no_source_reads() {
	start_daemon "$BLOCKS,cache_size=100M"
	cat "$MNT/shards/s0.tfrecord" >/dev/null
	stop_daemon
	# A new mount: every block is checked on its first use, then read by
	# range (served by the daemon: passthrough is the next test's).
	start_daemon "$BLOCKS,cache_size=100M,passthrough=0"
	drop_caches
	compare_ranges s0.tfrecord 2000 4096 || fail "random 4 KiB reads differ"
	compare_ranges s0.tfrecord 2000 4096 2 || fail "random 4 KiB reads from two threads differ"
	expect_eq "source reads" "$(stat_value remote_ops.read)" 0
	expect_eq "block misses" "$(stat_value block_misses)" 0
	[ "$(stat_value block_hits)" -ge 13 ] || fail "only $(stat_value block_hits) block hits"
}

# The first read of an uncached shard reads just its bytes from the source
# (a head read), and the whole block behind it: one source call more, the
# block still cached once, every byte the source's.
test_a_first_read_waits_for_its_own_bytes_only() {
	start_daemon "$BLOCKS,cache_size=100M"
	python3 - "$MNT/shards/s1.tfrecord" "$SRC/shards/s1.tfrecord" <<'PY' || fail "the head read's bytes differ"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
off = 3 * 1024 * 1024 // 2 + 100      # inside block 1
got = os.pread(fd, 4096, off)
os.close(fd)
with open(sys.argv[2], "rb") as f:
    f.seek(off)
    assert got == f.read(4096), "bytes differ"
PY
	expect_eq "head reads" "$(stat_value head_reads)" 1
	cmp "$MNT/shards/s1.tfrecord" "$SRC/shards/s1.tfrecord" || fail "the shard differs after its head read"
	# A new open, whose first read (block 0, uncached) is a head read too.
	expect_eq "head reads after the whole shard" "$(stat_value head_reads)" 2
	if [ -z "${DLC_SOURCE:-}" ]; then
		# 13 blocks, each read once (those behind the head reads too), and two heads.
		expect_eq "source reads" "$(stat_value remote_ops.read)" 15
	fi
	local i
	for i in $(seq 100); do   # blocks are written to the cache behind the reader
		[ "$(stat_value block_admissions)" -eq 13 ] && break
		sleep 0.1
	done
	expect_eq "blocks of the shard cached" "$(stat_value block_admissions)" 13
	stop_daemon
	start_daemon "$BLOCKS,cache_size=100M"
	drop_caches
	cmp "$MNT/shards/s1.tfrecord" "$SRC/shards/s1.tfrecord" || fail "the cached shard differs"
	expect_eq "source reads once cached" "$(stat_value remote_ops.read)" 0
	expect_eq "no head read for a cached block" "$(stat_value head_reads)" 0
}
test_packed_a_first_read_waits_for_its_own_bytes_only() {
	DLC_SOURCE=$PACKED test_a_first_read_waits_for_its_own_bytes_only
}

test_a_corrupted_block_is_refetched_and_counted() {
	ALLOWED_LOG='cached block .* dropped'
	start_daemon "$BLOCKS,cache_size=100M"
	cat "$MNT/shards/s0.tfrecord" >/dev/null
	stop_daemon
	# Flip one byte in the middle of block 5 of the shard's data file.
	local victim
	victim=$(find "$CACHE/data" -type f -size "${SHARD_BYTES}c" | head -n 1)
	[ -n "$victim" ] || fail "no data file of the shard's size in the cache"
	printf '\xff' | dd of="$victim" bs=1 seek=$((5 * 1024 * 1024 + 4242)) conv=notrunc status=none
	start_daemon "$BLOCKS,cache_size=100M"
	drop_caches
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "bytes differ after a corrupted block"
	expect_eq "corrupt" "$(stat_value corrupt)" 1
	expect_eq "blocks refetched" "$(stat_value block_misses)" 1
	expect_eq "block written again" "$(stat_value block_admissions)" 1
}

test_kill_9_mid_stream_then_remount_serves_only_correct_bytes() {
	ALLOWED_LOG='cached block .* dropped'
	local r readers=() i
	start_daemon "$BLOCKS,cache_size=100M,source_delay=5ms,source_bw=5M"
	for r in 0 1 2; do
		cat "$MNT/shards/s$r.tfrecord" >/dev/null 2>&1 &
		readers+=($!)
	done
	# 36 MiB at 5 MB/s take about 7 s: kill once a few blocks are written
	# and the index has committed them (it commits every second).
	for i in $(seq 1 100); do
		[ "$(stat_value block_admissions)" -ge 3 ] && break
		sleep 0.1
	done
	sleep 1.5
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	for r in "${readers[@]}"; do wait "$r" 2>/dev/null || true; done
	: >"$LOG"
	start_daemon "$BLOCKS,cache_size=100M"
	local reused
	reused=$(stat_value cache.entries)
	drop_caches
	for r in 0 1 2; do
		cmp "$MNT/shards/s$r.tfrecord" "$SRC/shards/s$r.tfrecord" || fail "s$r differs after kill -9"
	done
	[ "$reused" -gt 0 ] || fail "nothing was cached before kill -9: the test killed too early"
	[ "$(stat_value block_misses)" -gt 0 ] || fail "every block was cached before kill -9: the test killed too late"
	echo "files reused after kill -9: $reused, block hits $(stat_value block_hits), misses $(stat_value block_misses)"
}

# Readahead of all readers together stays within two windows of the
# budget: three readers slower than the source (their windows of 8 blocks
# fill) hold at most 16M of readahead, plus each reader's own blocks (two
# held, one being read): 25M.  Three full windows would be 24M of
# readahead alone, 33M in all.
test_readers_slower_than_the_source_share_two_windows() {
	ALLOWED_LOG='^$'
	start_daemon "$BLOCKS,source_delay=2ms"
	python3 - "$MNT/shards" <<'PY' || fail "a slow reader failed"
import os, sys, threading, time
def read(path):
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, 256 << 10):
        time.sleep(0.03)
    os.close(fd)
threads = [threading.Thread(target=read, args=("%s/s%d.tfrecord" % (sys.argv[1], i),)) for i in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
PY
	local peak
	peak=$(stat_value memory.peak)
	[ "$peak" -le $((25 << 20)) ] || fail "memory peak $peak with three slow readers (> 25M)"
	# Readahead ran (the kernel's own requests, 1 MiB each and several at
	# once, take some blocks before it does: 11-15 of 36 seen).
	[ "$(stat_value readaheads)" -ge 8 ] || fail "only $(stat_value readaheads) readaheads"
}

test_the_disk_stays_within_capacity_with_blocks() {
	# Room for two of the three shards, LRU: every new shard evicts one,
	# while four readers stream them; a watcher (watch_cache_start in
	# lib.sh) sums the cache files all through.
	local limit=$((25 * 1024 * 1024 + 2 * 4096))
	rm -f "$WORK/stop-watch"        # left by the run over another source
	start_daemon "$BLOCKS,cache_size=$limit,policy=lru"
	watch_cache_start 120
	local r readers=()
	for r in 1 2 3 4; do
		python3 - "$MNT/shards" "$SRC/shards" "$r" <<'PY' &
import os, random, sys
mnt, src, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
for _ in range(3):
    names = sorted(os.listdir(src))
    rng.shuffle(names)
    for n in names:
        if open(os.path.join(mnt, n), "rb").read() != open(os.path.join(src, n), "rb").read():
            sys.exit("%s differs" % n)
PY
		readers+=($!)
	done
	for r in "${readers[@]}"; do wait "$r" || fail "a reader failed"; done
	watch_cache_stop
	[ "$WATCH_SAMPLES" -ge 5 ] || fail "the watcher took only $WATCH_SAMPLES samples"
	[ "$WATCH_PEAK" -le "$limit" ] || fail "the cache files reached $WATCH_PEAK bytes, over $limit"
	[ "$(cache_files_bytes)" -le "$limit" ] || fail "cache files exceed cache_size at the end"
	[ "$(stat_value evictions)" -gt 0 ] || fail "no eviction: the test did not churn"
	[ "$(stat_value cache.bytes)" -le "$limit" ] || fail "charged bytes over cache_size"
	echo "peak $WATCH_PEAK bytes over $WATCH_SAMPLES samples, $(stat_value evictions) evictions"
}

test_freeze_fills_once_then_keeps_the_shards_it_holds() {
	# Room for one shard and a half: the first shard read is admitted whole
	# (its blocks as they come), the others bypass; a second pass hits it.
	start_daemon "$BLOCKS,cache_size=20M,policy=freeze"
	cat "$MNT/shards/s0.tfrecord" "$MNT/shards/s1.tfrecord" "$MNT/shards/s2.tfrecord" >/dev/null
	expect_eq "entries" "$(stat_value cache.entries)" 1
	local misses
	misses=$(stat_value block_misses)
	drop_caches
	cmp "$MNT/shards/s0.tfrecord" "$SRC/shards/s0.tfrecord" || fail "s0 differs"
	expect_eq "no source read for the cached shard" "$(stat_value block_misses)" "$misses"
}

test_a_scored_shard_displaces_a_less_important_one() {
	# importance: one shard fits; s1 scored above s0 takes its place once
	# s0 has been read in this pass.
	start_daemon "$BLOCKS,cache_size=20M,policy=importance"
	expect_eq "scores" "$(control $'0.1 shards/s0.tfrecord\n0.9 shards/s1.tfrecord\n')" ok
	cat "$MNT/shards/s0.tfrecord" >/dev/null
	expect_eq "s0 cached" "$(grep -c s0 "$MNT/.cached")" 1
	cat "$MNT/shards/s1.tfrecord" >/dev/null
	expect_eq "s1 cached" "$(grep -c s1 "$MNT/.cached")" 1
	expect_eq "s0 evicted" "$(grep -c s0 "$MNT/.cached" || true)" 0
	[ "$(cache_files_bytes)" -le $((20 * 1024 * 1024)) ] || fail "cache files exceed cache_size"
	cmp "$MNT/shards/s1.tfrecord" "$SRC/shards/s1.tfrecord" || fail "s1 differs"
}

# The tests above over a dlcache pack of the tree (DLC_SOURCE: lib.sh's
# start_daemon mounts it instead of $SRC).
test_packed_reads_give_the_sources_bytes() {
	DLC_SOURCE=$PACKED test_sequential_random_parallel_and_mmap_reads_give_the_sources_bytes
}
test_packed_random_4k_reads_in_a_cached_file_make_no_source_reads() {
	DLC_SOURCE=$PACKED test_random_4k_reads_in_a_cached_file_make_no_source_reads
}
test_packed_corrupted_block_is_refetched_and_counted() {
	DLC_SOURCE=$PACKED test_a_corrupted_block_is_refetched_and_counted
}
test_packed_kill_9_mid_stream_then_remount_serves_only_correct_bytes() {
	DLC_SOURCE=$PACKED test_kill_9_mid_stream_then_remount_serves_only_correct_bytes
}
test_packed_disk_stays_within_capacity_with_blocks() {
	DLC_SOURCE=$PACKED test_the_disk_stays_within_capacity_with_blocks
}

# And over a tar shard indexed in place (dlcache snapshot --tar).
test_tar_reads_give_the_sources_bytes() {
	DLC_SOURCE=$TARS test_sequential_random_parallel_and_mmap_reads_give_the_sources_bytes
}
test_tar_random_4k_reads_in_a_cached_file_make_no_source_reads() {
	DLC_SOURCE=$TARS test_random_4k_reads_in_a_cached_file_make_no_source_reads
}
test_tar_corrupted_block_is_refetched_and_counted() {
	DLC_SOURCE=$TARS test_a_corrupted_block_is_refetched_and_counted
}
# Capacity over a tar source is not run again: its blocks are charged by the
# same code as a pack's (cache_blocks.c, after the source read), which
# test_packed_disk_stays_within_capacity_with_blocks covers; 11 s saved in
# each build CI runs.

# Under the sanitizers (tests/sanitize.sh sets DLC_SANITIZE) the packed and
# tar sources keep only their bytes tests: the others run the same blocks.c
# and cache code as over the tree, which they cover there, and the main build
# runs them all over every source.  About 30 s of CI.  The counts of page
# faults and of source bytes under the kernel's reordering are the main
# build's: ASan's allocator keeps freed memory out of use (quarantine), and
# its slower daemon answers the kernel in other orders.
if [ -n "${DLC_SANITIZE:-}" ]; then
	unset -f test_the_kernel_reads_large_files_in_large_requests_into_kept_buffers \
		test_a_stream_the_cache_cannot_keep_reads_each_block_from_the_source_once \
		test_packed_random_4k_reads_in_a_cached_file_make_no_source_reads \
		test_packed_corrupted_block_is_refetched_and_counted \
		test_packed_kill_9_mid_stream_then_remount_serves_only_correct_bytes \
		test_packed_disk_stays_within_capacity_with_blocks \
		test_tar_random_4k_reads_in_a_cached_file_make_no_source_reads \
		test_tar_corrupted_block_is_refetched_and_counted
fi

run_tests
