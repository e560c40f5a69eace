#!/usr/bin/env bash
# Announced shards (src/read/blocks.c, "Announced shards"): `prefetch PATH`
# lines on files larger than cache_max_file stream their blocks ahead of
# the reader, in announced order, so that a WebDataset-style job reading
# tar shards with Python's tarfile over a slow source reads warm.  Every
# byte read through the mount is the source's; the stream holds at most
# readahead_max bytes not yet read; a reader arriving at a block in flight
# joins it (one source read per block); prefetched blocks enter the cache
# only into free room, never evicting for bytes not read yet.
. "$(dirname "$0")/lib.sh"

# Six WebDataset-like shards of 4-8 MiB (samples NNNNNN.jpg + NNNNNN.cls),
# read by blocks of 1 MiB: cache_max_file is 1 MiB.
python3 - "$SRC/shards" <<'PY'
import io, os, random, sys, tarfile
root = sys.argv[1]
os.makedirs(root)
rng = random.Random(38)
key = 0
for s in range(6):
    target = (4 + s % 5) * 1024 * 1024
    with tarfile.open(os.path.join(root, "shard-%06d.tar" % s), "w", format=tarfile.GNU_FORMAT) as tar:
        size = 0
        while size < target:
            for ext, data in (("jpg", rng.randbytes(rng.randrange(150000, 450000))),
                              ("cls", b"%d\n" % rng.randrange(1000))):
                info = tarfile.TarInfo("%06d.%s" % (key, ext))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                size += 512 + (len(data) + 511) // 512 * 512
            key += 1
PY
SHARDS=$(cd "$SRC" && ls shards/*.tar)
BLOCKS="cache_max_file=1M,block_size=1M"

# blocks_of REL...: the 1 MiB blocks of the files.
blocks_of() {
	local f total=0
	for f in "$@"; do
		total=$((total + ($(stat -c %s "$SRC/$f") + 1048575) / 1048576))
	done
	echo "$total"
}

# announce REL...: one prefetch line per file, in one write to .control.
announce() {
	local f text=""
	for f in "$@"; do text+="prefetch $f"$'\n'; done
	expect_eq "writing the prefetch lines" "$(control "$text")" ok
}

# wait_stat KEY VALUE SECONDS: waits until the .stats member KEY reaches VALUE.
wait_stat() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(stat_value "$1" 2>/dev/null)" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.1
	done
	fail "$1 did not reach $2 in $3 s: $(stat_value "$1" 2>&1 | tail -n 1)"
}

# stream_shards REL...: streams each shard through the mount with tarfile
# (mode "r|", as WebDataset does), checks every member against the
# source's tar and every byte read against the source file; prints the
# seconds the pass took.
stream_shards() {
	python3 - "$MNT" "$SRC" "$@" <<'PY'
import hashlib, sys, tarfile, time

class Tee:
    """The shard's file, hashing every byte tarfile reads from it."""
    def __init__(self, f):
        self.f, self.hash, self.count = f, hashlib.sha256(), 0
    def read(self, n=-1):
        data = self.f.read(n)
        self.hash.update(data)
        self.count += len(data)
        return data

mnt, src, shards = sys.argv[1], sys.argv[2], sys.argv[3:]
elapsed = 0.0
for rel in shards:
    with tarfile.open("%s/%s" % (src, rel)) as ref:
        expected = {m.name: ref.extractfile(m).read() for m in ref if m.isfile()}
    start = time.monotonic()
    seen = {}
    with open("%s/%s" % (mnt, rel), "rb", buffering=0) as f:
        tee = Tee(f)
        with tarfile.open(fileobj=tee, mode="r|") as tar:
            for member in tar:
                seen[member.name] = tar.extractfile(member).read()
        while tee.read(1 << 20):
            pass
    elapsed += time.monotonic() - start
    if seen != expected:
        sys.exit("%s: the members read through the mount differ from the source's" % rel)
    with open("%s/%s" % (src, rel), "rb") as g:
        whole = g.read()
    if tee.count != len(whole) or tee.hash.digest() != hashlib.sha256(whole).digest():
        sys.exit("%s: the bytes read through the mount differ from the source's" % rel)
print("%.2f" % elapsed)
PY
}

# The job announces its epoch's shard order, does its set-up while the
# stream fetches ahead, then streams the shards: every block of the first
# shard, fetched before any read, is taken from memory, and most blocks of
# the others (the reader's own readahead takes the rest: it reads past the
# stream's window at times).  Without the announcement, nothing is fetched
# ahead of the first read of a shard and the same pass waits on the source.
test_announced_shards_are_read_from_prefetched_blocks() {
	local first total plain announced
	# shellcheck disable=SC2086
	total=$(blocks_of $SHARDS)
	first=$(blocks_of shards/shard-000000.tar)

	start_daemon "$BLOCKS,readahead_max=8M,cache_size=100M,passthrough=0,source_delay=100ms"
	# shellcheck disable=SC2086
	plain=$(stream_shards $SHARDS) || fail "the shards read without an announcement differ"
	stop_daemon
	rm -rf "$CACHE"

	start_daemon "$BLOCKS,readahead_max=8M,cache_size=100M,passthrough=0,source_delay=100ms"
	# shellcheck disable=SC2086
	announce $SHARDS
	# Before any read, the first shard is read from the source, into memory.
	wait_stat block_misses "$first" 15
	expect_eq "blocks fetched ahead" "$(stat_value shard_prefetches)" "$(stat_value block_misses)"
	# shellcheck disable=SC2086
	announced=$(stream_shards $SHARDS) || fail "the announced shards read through the mount differ"
	local hits
	hits=$(stat_value shard_prefetch_hits)
	echo "   first pass over $total blocks: ${plain} s without, ${announced} s with the announcement; $hits blocks from the stream"
	[ "$hits" -ge "$first" ] || fail "only $hits blocks were served from prefetched blocks (the first shard has $first)"
	[ "$((hits * 2))" -ge "$total" ] ||
		fail "only $hits of $total blocks were served from prefetched blocks"
	# Each block came from the source once, and went into the cache.
	expect_eq "blocks read from the source" "$(stat_value block_misses)" "$total"
	expect_eq "blocks cached" "$(stat_value block_admissions)" "$total"
	expect_eq "remote errors" "$(stat_value remote_errors)" 0
	python3 -c 'import sys; a, p = float(sys.argv[1]), float(sys.argv[2]); sys.exit(a >= p)' \
		"$announced" "$plain" || fail "the announced pass (${announced} s) was not faster than the plain one (${plain} s)"
}

# A reader that opens an announced shard while its stream's blocks are in
# flight joins them: each block is read from the source once, and the
# reader makes no head read of its own.
test_a_reader_joins_the_blocks_in_flight() {
	local shard=shards/shard-000004.tar n
	n=$(blocks_of "$shard")
	start_daemon "$BLOCKS,readahead_max=8M,cache_size=100M,passthrough=0,source_delay=400ms"
	announce "$shard"
	stream_shards "$shard" >/dev/null || fail "the shard read through the mount differs"
	expect_eq "source reads" "$(stat_value remote_ops.read)" "$n"
	expect_eq "source opens" "$(stat_value remote_ops.open)" 1
	expect_eq "head reads" "$(stat_value head_reads)" 0
	expect_eq "blocks served from the stream" "$(stat_value shard_prefetch_hits)" "$n"
}

# The stream holds at most readahead_max bytes nobody has read yet: with
# six shards announced and no reader, it stops at four blocks of 1 MiB, and
# goes on by as much as a reader takes.
test_the_stream_stays_within_readahead_max() {
	start_daemon "$BLOCKS,readahead_max=4M,cache_size=100M,passthrough=0,source_delay=50ms"
	# shellcheck disable=SC2086
	announce $SHARDS
	wait_stat shard_prefetches 4 10
	sleep 1
	expect_eq "blocks fetched ahead of any reader" "$(stat_value shard_prefetches)" 4
	[ "$(stat_value memory.used)" -le $((4 * 1048576 + 65536)) ] ||
		fail "memory.used $(stat_value memory.used) passes readahead_max"
	# Reading the first 2 MiB of the first shard makes room for two more.
	head -c $((2 * 1048576)) "$MNT/shards/shard-000000.tar" | cmp - <(head -c $((2 * 1048576)) "$SRC/shards/shard-000000.tar") ||
		fail "the head of the first shard differs"
	wait_stat shard_prefetch_hits 2 10
	[ "$(stat_value shard_prefetches)" -ge 6 ] || wait_stat shard_prefetches 6 10
}

# Prefetched blocks go into the cache only while it has free room: a shard
# announced into a full cache evicts nothing until it is read; then it is
# offered as a miss would be (lru: a miss evicts the least recent file).
test_prefetched_blocks_enter_the_cache_only_into_free_room() {
	local a=shards/shard-000003.tar b=shards/shard-000004.tar
	# 10 MiB: the 7 MiB shard fills it, and an 8 MiB one does not fit beside.
	start_daemon "$BLOCKS,readahead_max=16M,cache_size=10M,policy=lru,passthrough=0,source_delay=20ms"
	cmp "$MNT/$a" "$SRC/$a" || fail "$a differs"
	expect_eq "blocks of $a cached" "$(stat_value block_admissions)" "$(blocks_of "$a")"
	announce "$b"
	wait_stat shard_prefetches "$(blocks_of "$b")" 10
	sleep 0.5
	expect_eq "evictions for a shard not read yet" "$(stat_value evictions)" 0
	expect_eq "blocks cached" "$(stat_value block_admissions)" "$(blocks_of "$a")"
	stream_shards "$b" >/dev/null || fail "$b read through the mount differs"
	expect_eq "blocks served from the stream" "$(stat_value shard_prefetch_hits)" "$(blocks_of "$b")"
	# Read, it is offered: the policy makes room by evicting the first.
	wait_stat block_admissions "$(($(blocks_of "$a") + $(blocks_of "$b")))" 10
	expect_eq "evictions once the shard is read" "$(stat_value evictions)" 1
}

run_tests
