#!/usr/bin/env bash
# Packed datasets: dlcache pack, then a mount of the packed directory that
# presents the original tree; GNU tar reads the chunks; damaged chunks fail
# only the files they damage; chunk_fetch; .chunks; an interrupted pack.
. "$(dirname "$0")/lib.sh"

make_dataset "$SRC" 6 30 20000
mkdir -p "$SRC/empty dir" "$SRC/ünïcode name"
echo "hello" >"$SRC/ünïcode name/a file.txt"
: >"$SRC/zero bytes"
ln -s train/n00000000/n00000000_0.JPEG "$SRC/link"
ln -s /etc/passwd "$SRC/outside"
PACKED=$WORK/packed
CHUNK_SIZE=256K
"$DLCACHE" pack "$SRC" "$PACKED" --chunk-size "$CHUNK_SIZE" >/dev/null 2>"$WORK/pack.err" ||
	fail "pack: $(cat "$WORK/pack.err")"
[ -s "$WORK/pack.err" ] && fail "pack printed on stderr: $(cat "$WORK/pack.err")"
SNAPSHOT=$PACKED/dlcache.snapshot
NCHUNKS=$(find "$PACKED" -name 'chunk-*.tar' | wc -l)
NFILES=$(find "$SRC" -type f | wc -l)
[ "$NCHUNKS" -gt 8 ] || fail "only $NCHUNKS chunks"
DAMAGE_LOG='chunk chunk-[0-9]+\.tar (does not hold the bytes packed for the file|ends before the file)'

# compare_tree A B: every file, link and directory of A is in B with the same
# bytes, target or kind; prints the number of regular files.
compare_tree() {
	python3 - "$1" "$2" <<'PY'
import os, stat, sys
a, b = sys.argv[1], sys.argv[2]
files = 0
for d, dirs, names in os.walk(a):
    for n in dirs + names:
        p = os.path.join(d, n)
        q = os.path.join(b, os.path.relpath(p, a))
        sa, sb = os.lstat(p), os.lstat(q)
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            sys.exit("kind differs: " + q)
        if stat.S_ISLNK(sa.st_mode) and os.readlink(p) != os.readlink(q):
            sys.exit("link differs: " + q)
        if stat.S_ISREG(sa.st_mode):
            with open(p, "rb") as x, open(q, "rb") as y:
                if x.read() != y.read():
                    sys.exit("bytes differ: " + q)
            files += 1
print(files)
PY
}

# listing DIR: "path size mode kind" of every entry, write bits cleared (the mount is read-only).
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%P %s %m %y\n') | python3 -c '
import sys
for line in sorted(sys.stdin):
    p, s, m, y = line.rstrip("\n").rsplit(" ", 3)
    print(p, s, oct(int(m, 8) & ~0o222)[2:], y)'
}

# members CHUNK: "offset size name" of the regular files of chunk CHUNK, by offset.
members() {
	python3 - "$SNAPSHOT" "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for off, size, name in db.execute("SELECT data_offset, size, name FROM entries WHERE chunk = ?"
                                  " ORDER BY data_offset", (int(sys.argv[2]),)):
    print(off, size, name)
PY
}

# read_errors: reads every file of $SRC through $MNT; prints the paths that
# fail with EIO (sorted) and fails on any other error or on wrong bytes.
read_errors() {
	python3 - "$SRC" "$MNT" <<'PY'
import errno, os, sys
src, mnt = sys.argv[1], sys.argv[2]
bad = []
for d, _, names in os.walk(src):
    for n in names:
        p = os.path.relpath(os.path.join(d, n), src)
        if os.path.islink(os.path.join(src, p)):
            continue
        try:
            with open(os.path.join(mnt, p), "rb") as f:
                data = f.read()
        except OSError as e:
            if e.errno != errno.EIO:
                sys.exit("%s: %s" % (p, e))
            bad.append(p)
            continue
        if data != open(os.path.join(src, p), "rb").read():
            sys.exit("bytes differ: " + p)
for p in sorted(bad):
    print(p)
PY
}

test_pack_then_mount_gives_the_original_tree() {
	start_daemon_from "$PACKED"
	expect_eq "files compared" "$(compare_tree "$SRC" "$MNT")" "$NFILES"
	[ "$(listing "$SRC")" = "$(listing "$MNT")" ] ||
		fail "listings differ: $(diff <(listing "$SRC") <(listing "$MNT") | head)"
	expect_eq "readlink" "$(readlink "$MNT/outside")" "/etc/passwd"
	expect_eq "remote metadata calls" "$(stat_value remote_ops.metadata)" 0
	expect_eq "snapshot entries" "$(stat_value snapshot.entries)" "$(find "$SRC" | wc -l)"
	expect_eq "the packed snapshot is the mount's" \
		"$(ls "$CACHE" | grep -c snapshot || true)" 0
}

test_chunks_are_tar_archives_gnu_tar_reads() {
	local out=$WORK/extracted c
	mkdir -p "$out"
	for c in "$PACKED"/chunk-*.tar; do
		tar -tf "$c" >/dev/null 2>"$WORK/tar.err" || fail "tar -tf $c: $(cat "$WORK/tar.err")"
		[ -s "$WORK/tar.err" ] && fail "tar -tf $c warned: $(cat "$WORK/tar.err")"
		tar -xf "$c" -C "$out" 2>"$WORK/tar.err" || fail "tar -xf $c: $(cat "$WORK/tar.err")"
		[ -s "$WORK/tar.err" ] && fail "tar -xf $c warned: $(cat "$WORK/tar.err")"
	done
	expect_eq "files extracted and compared" "$(compare_tree "$SRC" "$out")" "$NFILES"
	expect_eq "nothing more was extracted" "$(compare_tree "$out" "$SRC")" "$NFILES"
	# Members are the snapshot's files in inode order: the first chunk starts
	# with the top directory's entries.
	expect_eq "first member" "$(tar -tf "$PACKED/chunk-000000.tar" | head -n 1)" "empty dir/"
}

test_an_epoch_opens_each_chunk_once() {
	start_daemon_from "$PACKED" "policy=none"
	expect_eq "files read in epoch 1" "$(read_all_shuffled)" 180
	drop_caches
	expect_eq "files read in epoch 2" "$(read_all_shuffled)" 180
	# Every chunk holds files of train/: one open per chunk for both epochs.
	expect_eq "source opens for $NCHUNKS chunks and $NFILES files" \
		"$(stat_value remote_ops.open)" "$NCHUNKS"
	expect_eq "source closes while mounted" "$(stat_value remote_ops.close)" 0
	expect_eq "admissions with policy=none" "$(stat_value admissions)" 0
}

test_large_files_are_cached_by_blocks_read_from_their_chunk() {
	# Above cache_max_file, files are cached by blocks (blocks.c), each
	# block read by range from the chunk's shared handle; a remount with
	# the page cache dropped serves them with no source read.
	start_daemon_from "$PACKED" "cache_max_file=16K,block_size=64K"
	expect_eq "files compared" "$(compare_tree "$SRC" "$MNT")" "$NFILES"
	python3 - "$MNT" "$SRC" <<'PY' || fail "random ranges of large files"
import os, random, sys
mnt, src = sys.argv[1], sys.argv[2]
rng = random.Random(7)
big = [os.path.relpath(os.path.join(d, n), src) for d, _, ns in os.walk(src) for n in ns
       if not os.path.islink(os.path.join(d, n)) and os.path.getsize(os.path.join(d, n)) > 16384]
assert len(big) > 50, len(big)
for p in rng.sample(big, 50):
    size = os.path.getsize(os.path.join(src, p))
    with open(os.path.join(mnt, p), "rb", buffering=0) as a, open(os.path.join(src, p), "rb") as b:
        for _ in range(5):
            off, n = rng.randrange(size + 10), rng.randrange(1, 40000)
            a.seek(off); b.seek(off)
            assert a.read(n) == b.read(n), (p, off, n)
PY
	[ "$(stat_value block_misses)" -gt 0 ] || fail "no large file was read by blocks"
	[ "$(stat_value block_admissions)" -gt 0 ] || fail "no block was cached"
	[ "$(stat_value remote_ops.open)" -le "$NCHUNKS" ] || fail "block reads opened more than the chunks"
	expect_eq "remote errors" "$(stat_value remote_errors)" 0
	stop_daemon
	start_daemon_from "$PACKED" "cache_max_file=16K,block_size=64K"
	drop_caches
	expect_eq "files compared after a remount" "$(compare_tree "$SRC" "$MNT")" "$NFILES"
	expect_eq "source reads after a remount" "$(stat_value remote_ops.read)" 0
	expect_eq "block misses after a remount" "$(stat_value block_misses)" 0
	# Served by blocks, or whole once checked at open (passthrough).
	[ $(($(stat_value block_hits) + $(stat_value whole_block_opens))) -gt 0 ] ||
		fail "no block hit after a remount"
}

test_prefetch_reads_ahead_from_the_chunks() {
	start_daemon_from "$PACKED" "source_delay=5ms"
	local order=$WORK/order
	(cd "$SRC" && find train -type f | sort) | shuf -n 60 --random-source=<(yes) >"$order"
	sed 's/^/prefetch /' "$order" >"$MNT/.control"
	while IFS= read -r p; do
		cmp "$MNT/$p" "$SRC/$p" || fail "bytes of $p"
	done <"$order"
	[ "$(stat_value prefetches)" -gt 0 ] || fail "nothing was prefetched"
	[ "$(stat_value prefetch_hits)" -gt 0 ] || fail "no open was served from prefetched bytes"
	[ "$(stat_value remote_ops.open)" -le "$NCHUNKS" ] || fail "prefetch opened more than the chunks"
}

test_dot_chunks_lists_every_file_with_its_chunk() {
	start_daemon_from "$PACKED"
	python3 - "$MNT" "$SNAPSHOT" "$NCHUNKS" <<'PY' || fail ".chunks"
import os, sqlite3, sys
mnt, snap, nchunks = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(os.path.join(mnt, ".chunks"), "rb").read().decode().split("\n")
assert lines[-1] == "", "the last line has no newline"
rows = [l.split("\t", 1) for l in lines[:-1]]
db = sqlite3.connect(snap)
expected = [c for (c,) in db.execute("SELECT chunk FROM entries WHERE chunk IS NOT NULL ORDER BY ino")]
assert [int(c) for c, _ in rows] == expected, "chunk column differs from the snapshot"
assert expected == sorted(expected), "chunks do not grow in snapshot order"
assert set(expected) == set(range(nchunks)), "some chunk is not listed"
for _, p in rows:
    assert os.path.isfile(os.path.join(mnt, p)) and not os.path.islink(os.path.join(mnt, p)), p
regular = sum(1 for d, _, ns in os.walk(mnt) for n in ns if not os.path.islink(os.path.join(d, n)))
assert len(rows) == regular, (len(rows), regular)
PY
	ls -a "$MNT" | grep -x '.chunks' >/dev/null && fail ".chunks appears in the root listing"
	stop_daemon
	start_daemon
	expect_eq ".chunks of an unpacked mount" "$(wc -c <"$MNT/.chunks")" 0
}

test_the_chunk_sampler_reads_a_window_of_chunks_at_a_time() {
	# The dlcache package's ChunkShuffleSampler over this mount's .chunks.
	start_daemon_from "$PACKED"
	/usr/bin/python3 - "$MNT" <<'PY' || fail "ChunkShuffleSampler"
import os, sys
import dlcache
mount = dlcache.Mount(sys.argv[1])
chunks = mount.chunks()
paths = [os.path.join(mount.root, p) for p in sorted(chunks)]
assert len(set(chunks.values())) > 4, "too few chunks to test a window"
sampler = dlcache.ChunkShuffleSampler(paths, chunks, mount=mount, window=2, prefetch=False)
sampler.set_epoch(1)
order = list(sampler)
assert sorted(order) == list(range(len(paths))), "not every file once"
seen, current, done = [], set(), set()
for i in order:
    c = chunks[mount.relpath(paths[i])]
    assert c not in done, "chunk %d comes back after its window" % c
    current.add(c)
    if len(current) > 2:
        done |= current - {c}
        current = {c}
print("ok: %d files in %d chunks" % (len(order), len(set(chunks.values()))))
PY
	stop_daemon
}

test_chunk_fetch_admits_a_whole_chunk_from_one_read() {
	start_daemon_from "$PACKED" "chunk_fetch=1"
	local chunk=3 first n
	n=$(awk -F'\t' -v c=$chunk '$1 == c' "$MNT/.chunks" | wc -l)
	[ "$n" -gt 3 ] || fail "chunk $chunk has only $n files"
	first=$(awk -F'\t' -v c=$chunk '$1 == c {print $2; exit}' "$MNT/.chunks")
	cmp "$MNT/$first" "$SRC/$first" || fail "bytes of $first"
	expect_eq "whole chunks read" "$(stat_value chunk_reads)" 1
	expect_eq "admissions from one miss" "$(stat_value admissions)" "$n"
	expect_eq "chunk admissions" "$(stat_value chunk_admissions)" $((n - 1))
	expect_eq "source opens" "$(stat_value remote_ops.open)" 1
	# One sequential read from the chunk's first file to the end of its last.
	expect_eq "bytes from the source" "$(stat_value bytes_from_remote)" \
		"$(members $chunk | awk 'NR == 1 {lo = $1} {hi = $1 + $2} END {print hi - lo}')"
	expect_eq "source reads" "$(stat_value remote_ops.read)" 1
	awk -F'\t' -v c=$chunk '$1 == c {print $2}' "$MNT/.chunks" | while IFS= read -r p; do
		cmp "$MNT/$p" "$SRC/$p" || fail "bytes of $p"
	done
	expect_eq "misses after reading the chunk" "$(stat_value misses)" 1
	expect_eq "hits after reading the chunk (the first file twice)" "$(stat_value hits)" "$n"
	expect_eq "source reads after reading the chunk" "$(stat_value remote_ops.read)" 1
}

test_chunk_fetch_serves_concurrent_readers_from_one_read() {
	# A slow source, so that the readers of chunk 5 pile up behind its first
	# miss and get their bytes from that one read.
	start_daemon_from "$PACKED" "chunk_fetch=1,source_delay=300ms"
	local chunk=5 n pids=()
	n=$(awk -F'\t' -v c=$chunk '$1 == c' "$MNT/.chunks" | wc -l)
	while IFS= read -r p; do
		cmp "$MNT/$p" "$SRC/$p" &
		pids+=($!)
	done < <(awk -F'\t' -v c=$chunk '$1 == c {print $2}' "$MNT/.chunks")
	for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader got wrong bytes"; done
	expect_eq "whole chunks read" "$(stat_value chunk_reads)" 1
	expect_eq "source reads for $n concurrent readers" "$(stat_value remote_ops.read)" 1
	expect_eq "admissions" "$(stat_value admissions)" "$n"
	expect_eq "source opens" "$(stat_value remote_ops.open)" 1
	# Readers that waited were handed their bytes and admitted them themselves.
	[ "$(stat_value chunk_admissions)" -lt $((n - 1)) ] ||
		fail "no reader was handed its bytes by the whole read"
}

test_chunk_fetch_holds_refused_files_for_a_chunk_wise_reader() {
	# No cache at all: a whole read of chunk 2 is refused file by file and
	# held in memory, where reading the rest of the chunk finds it.
	start_daemon_from "$PACKED" "chunk_fetch=1,policy=none"
	local chunk=2 n
	n=$(awk -F'\t' -v c=$chunk '$1 == c' "$MNT/.chunks" | wc -l)
	awk -F'\t' -v c=$chunk '$1 == c {print $2}' "$MNT/.chunks" | shuf --random-source=<(yes) |
		while IFS= read -r p; do
			cmp "$MNT/$p" "$SRC/$p" || fail "bytes of $p"
		done
	expect_eq "whole chunks read" "$(stat_value chunk_reads)" 1
	expect_eq "source reads" "$(stat_value remote_ops.read)" 1
	expect_eq "opens served from held bytes" "$(stat_value chunk_hits)" $((n - 1))
	expect_eq "admissions" "$(stat_value admissions)" 0
	# Held bytes are taken once: the next epoch reads them from the chunk again.
	drop_caches
	awk -F'\t' -v c=$chunk '$1 == c {print $2}' "$MNT/.chunks" | while IFS= read -r p; do
		cmp "$MNT/$p" "$SRC/$p" || fail "bytes of $p in epoch 2"
	done
	expect_eq "source reads after epoch 2" "$(stat_value remote_ops.read)" $((n + 1))
}

test_chunk_fetch_still_lets_importance_decide() {
	# Room for exactly the last three files of chunk 3, which are the only
	# ones scored: reading the chunk whole admits the unscored files while
	# there is room, then the scored ones evict them.
	local chunk=3 capacity scored
	scored=$(members $chunk | tail -n 3 | awk '{print $3}' | sort)
	capacity=$(members $chunk | tail -n 3 | awk '{s += int(($2 + 4095) / 4096) * 4096} END {print s}')
	start_daemon_from "$PACKED" "chunk_fetch=1,cache_size=$capacity"
	awk -F'\t' -v c=$chunk '$1 == c {print $2}' "$MNT/.chunks" | tail -n 3 |
		sed 's/^/10 /' >"$MNT/.control"
	cmp "$MNT/$(awk -F'\t' -v c=$chunk '$1 == c {print $2; exit}' "$MNT/.chunks")" \
		"$SRC/$(awk -F'\t' -v c=$chunk '$1 == c {print $2; exit}' "$MNT/.chunks")" ||
		fail "bytes of the chunk's first file"
	expect_eq "whole chunks read" "$(stat_value chunk_reads)" 1
	expect_eq "cached after one whole read" "$(xargs -n1 -d '\n' basename <"$MNT/.cached" | sort)" "$scored"
	[ "$(stat_value evictions)" -gt 0 ] || fail "no unscored file was evicted"
}

test_a_corrupted_chunk_fails_only_the_damaged_file() {
	local damaged=$WORK/damaged victim=n00000002_5.JPEG chunk off
	cp -a "$PACKED" "$damaged"
	read -r chunk off < <(python3 - "$SNAPSHOT" "$victim" <<'PY'
import sqlite3, sys
print(*sqlite3.connect(sys.argv[1]).execute(
    "SELECT c.path, e.data_offset FROM entries e JOIN chunks c ON c.id = e.chunk WHERE e.name = ?",
    (sys.argv[2],)).fetchone())
PY
)
	python3 - "$damaged/$chunk" $((off + 10)) <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))
PY
	ALLOWED_LOG=$DAMAGE_LOG
	start_daemon_from "$damaged"
	expect_eq "files failing with EIO" "$(read_errors)" "train/n00000002/$victim"
	cat "$MNT/train/n00000002/$victim" >/dev/null 2>&1 && fail "the damaged file read twice"
	expect_eq "damage logged once" "$(grep -cE "$DAMAGE_LOG" "$LOG")" 1
	[ "$(stat_value remote_errors)" -ge 2 ] || fail "remote errors not counted"
	expect_eq "cached copies of the damaged file" "$(grep -c "$victim" "$MNT/.cached" || true)" 0
	stop_daemon
	ALLOWED_LOG='^$'
}

test_a_truncated_chunk_fails_only_files_past_its_end() {
	local damaged=$WORK/truncated chunk=4 cut expected
	cp -a "$PACKED" "$damaged"
	# Cut through the middle of the chunk's fourth file.
	cut=$(members $chunk | awk 'NR == 4 {print $1 + int($2 / 2)}')
	truncate -s "$cut" "$damaged/chunk-00000$chunk.tar"
	expected=$(members $chunk | awk -v cut="$cut" '$1 + $2 > cut {print $3}' | sort)
	[ "$(echo "$expected" | wc -l)" -ge 2 ] || fail "too few files past the cut"
	ALLOWED_LOG=$DAMAGE_LOG
	start_daemon_from "$damaged"
	expect_eq "files failing with EIO" "$(read_errors | xargs -n1 basename | sort)" "$expected"
	expect_eq "damage logged once" "$(grep -cE "$DAMAGE_LOG" "$LOG")" 1
	stop_daemon
	# The same with whole-chunk reads: the files before the cut still come through.
	rm -rf "$CACHE"
	start_daemon_from "$damaged" "chunk_fetch=1"
	expect_eq "files failing with EIO, chunk_fetch" "$(read_errors | xargs -n1 basename | sort)" "$expected"
	stop_daemon
	ALLOWED_LOG='^$'
}

test_a_missing_chunk_fails_only_its_files() {
	local damaged=$WORK/missing
	cp -a "$PACKED" "$damaged"
	rm "$damaged/chunk-000002.tar"
	ALLOWED_LOG='chunk chunk-000002\.tar cannot be opened on the source'
	start_daemon_from "$damaged"
	expect_eq "files failing with EIO" "$(read_errors | xargs -n1 basename | sort)" \
		"$(members 2 | awk '{print $3}' | sort)"
	expect_eq "logged once" "$(grep -c 'cannot be opened' "$LOG")" 1
	stop_daemon
	ALLOWED_LOG='^$'
}

SLOW_PID=
stop_slow_source() {
	[ -n "$SLOW_PID" ] || return 0
	if mountpoint -q "$WORK/slow-mnt" && ! fusermount3 -u "$WORK/slow-mnt"; then
		umount -l "$WORK/slow-mnt"
		kill "$SLOW_PID" 2>/dev/null
	fi
	wait "$SLOW_PID" 2>/dev/null
	SLOW_PID=
}
CLEANUP_HOOKS+=(stop_slow_source)

# A chunk whose source open hangs holds up only its own readers.  Chunk 2 is
# served (the same bytes, bind-mounted over its file) by a second dlcache
# mount whose source answers each call after 2 s, so opening it takes about
# 4 s; meanwhile misses in chunk 1, whose handle is open, answer at once.
test_a_chunk_open_that_hangs_holds_up_only_that_chunks_readers() {
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: the bind mount needs root"; return 0; }
	local stalled=$WORK/stalled-packed slow=$WORK/slow result
	cp -a "$PACKED" "$stalled"
	mkdir -p "$slow" "$WORK/slow-mnt"
	cp "$PACKED/chunk-000002.tar" "$slow/"
	"$DLCACHE" snapshot "$slow" -o "$WORK/slow.snapshot" >/dev/null
	"$DLCACHE" mount "$slow" "$WORK/slow-mnt" -f -o "cache_dir=$WORK/slow-cache,log_level=warning,snapshot=$WORK/slow.snapshot,source_delay=2s" \
		2>>"$WORK/slow.log" &
	SLOW_PID=$!
	for _ in $(seq 1 500); do
		[ -e "$WORK/slow-mnt/.stats" ] && break
		sleep 0.02
	done
	mount --bind "$WORK/slow-mnt/chunk-000002.tar" "$stalled/chunk-000002.tar" ||
		fail "bind mount of the slow chunk"
	EXTRA_MOUNTS+=("$stalled/chunk-000002.tar")
	start_daemon_from "$stalled"
	result=$(python3 - "$MNT" "$SRC" <<'PY'
import os, sys, threading, time
mnt, src = sys.argv[1], sys.argv[2]
by_chunk = {}
for line in open(os.path.join(mnt, ".chunks")).read().splitlines():
    chunk, path = line.split("\t", 1)
    by_chunk.setdefault(int(chunk), []).append(path)
def read(path):
    start = time.monotonic()
    with open(os.path.join(mnt, path), "rb") as f, open(os.path.join(src, path), "rb") as g:
        right = f.read() == g.read()
    return (time.monotonic() - start) * 1000, right
ms, right = read(by_chunk[1][0])                  # chunk 1's handle is open
assert right
stalled = []
t = threading.Thread(target=lambda: stalled.append(read(by_chunk[2][0])))
t.start()
time.sleep(0.5)                                   # chunk 2's open hangs now
times = []
for path in by_chunk[1][1:7]:
    ms, right = read(path)
    assert right, path
    times.append(ms)
t.join()
assert stalled[0][1], "chunk 2's bytes"
print(int(max(times)), int(stalled[0][0]))
PY
) || fail "reading the chunks"
	read -r longest stall <<<"$result"
	echo "   chunk 1 misses while chunk 2 opens: longest ${longest} ms; chunk 2's read: ${stall} ms"
	[ "$stall" -ge 2000 ] || fail "chunk 2's open did not hang (${stall} ms): the test proves nothing"
	[ "$longest" -lt 1000 ] || fail "a miss in chunk 1 waited ${longest} ms for chunk 2's open"
	stop_daemon
	umount "$stalled/chunk-000002.tar"
	EXTRA_MOUNTS=()
	stop_slow_source
	[ -s "$WORK/slow.log" ] && fail "the slow source's mount said: $(cat "$WORK/slow.log")"
	rm -rf "$stalled" "$slow" "$WORK/slow-cache" "$WORK/slow.snapshot"
}

test_more_chunks_than_descriptors() {
	# 456 chunks (one 8 KB file each) under 96 descriptors: the chunk
	# handles are closed least recently used first, no read fails, no good
	# entry is dropped, and running short of descriptors is never taken for
	# a failed cache disk.
	local many=$WORK/many packed=$WORK/many-packed
	mkdir -p "$many/train/c"
	python3 -c '
import os, random, sys
r = random.Random(7)
for i in range(456):
    open(os.path.join(sys.argv[1], "train/c/f%03d" % i), "wb").write(r.randbytes(8192))
' "$many"
	"$DLCACHE" pack "$many" "$packed" --chunk-size 4K >/dev/null || fail "pack of 456 files"
	[ "$(find "$packed" -name 'chunk-*.tar' | wc -l)" -ge 456 ] || fail "fewer than 456 chunks"
	( ulimit -n 96; exec "$DLCACHE" mount "$packed" "$MNT" -f \
		-o "cache_dir=$CACHE,log_level=warning,cache_size=2M" 2>>"$LOG" ) &
	DAEMON_PID=$!
	wait_mounted
	local pass bad
	for pass in 1 2; do
		bad=$(python3 - "$many" "$MNT" <<'PY'
import os, random, sys
src, mnt = sys.argv[1], sys.argv[2]
paths = ["train/c/" + n for n in os.listdir(os.path.join(src, "train/c"))]
random.shuffle(paths)
bad = 0
for p in paths:
    try:
        with open(os.path.join(mnt, p), "rb") as a, open(os.path.join(src, p), "rb") as b:
            bad += a.read() != b.read()
    except OSError:
        bad += 1
print(bad)
PY
)
		expect_eq "failed or wrong reads in pass $pass" "$bad" 0
		drop_caches
	done
	expect_eq "remote errors" "$(stat_value remote_errors)" 0
	expect_eq "entries dropped as corrupt" "$(stat_value corrupt)" 0
	expect_eq "admission still on" "$(stat_value cache.admission)" true
	[ "$(stat_value remote_ops.close)" -gt 0 ] || fail "no chunk handle was ever closed"
	local fds
	fds=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
	[ "$fds" -le 96 ] || fail "the daemon holds $fds descriptors"
	stop_daemon
	rm -rf "$many" "$packed"
}

test_pack_of_an_empty_tree_mounts_empty() {
	mkdir "$WORK/empty"
	"$DLCACHE" pack "$WORK/empty" "$WORK/empty-packed" >/dev/null || fail "pack of an empty tree"
	expect_eq "files in the empty pack" "$(ls -A "$WORK/empty-packed")" "dlcache.snapshot"
	start_daemon_from "$WORK/empty-packed"
	expect_eq "entries" "$(ls -A "$MNT" | wc -l)" 0
	expect_eq ".chunks" "$(wc -c <"$MNT/.chunks")" 0
}

test_refresh_of_a_packed_source_is_refused() {
	local err
	err=$("$DLCACHE" mount "$PACKED" "$MNT" -f -o "cache_dir=$CACHE,refresh" 2>&1) &&
		fail "refresh of a packed source was accepted"
	echo "$err" | grep -q "is packed" || fail "no sentence for refresh: $err"
	mountpoint -q "$MNT" && fail "mounted anyway"
	[ -f "$SNAPSHOT" ] && sqlite3 "$SNAPSHOT" 'SELECT count(*) FROM chunks' >/dev/null ||
		fail "the packed snapshot was touched"
}

test_snapshot_tar_over_gnu_tar_shards_mounts_with_the_right_bytes() {
	local shards=$WORK/shards out
	mkdir -p "$shards/part b"
	# WebDataset-like shards, in GNU tar's own and pax formats.
	tar --format=gnu -cf "$shards/shard-000000.tar" -C "$SRC/train" n00000000 n00000001
	tar --format=gnu -cf "$shards/shard-000001.tar" -C "$SRC/train" n00000002 n00000003
	tar --format=pax -cf "$shards/part b/shard-000002.tar" -C "$SRC/train" n00000004 n00000005
	out=$("$DLCACHE" snapshot --tar "$shards" 2>&1) || fail "snapshot --tar: $out"
	start_daemon_from "$shards"
	expect_eq "shard 0" "$(compare_tree "$SRC/train/n00000001" "$MNT/shard-000000/n00000001")" 30
	expect_eq "shard 1" "$(compare_tree "$SRC/train/n00000003" "$MNT/shard-000001/n00000003")" 30
	expect_eq "shard 2" "$(compare_tree "$SRC/train/n00000005" "$MNT/part b/shard-000002/n00000005")" 30
	expect_eq "top level" "$(ls "$MNT" | tr '\n' ' ')" "part b shard-000000 shard-000001 "
	# Chunks are numbered in shard path order ("part b/..." first); .chunks
	# follows the tree, where part b's files lie one level deeper.
	expect_eq "chunks of .chunks" "$(cut -f1 "$MNT/.chunks" | uniq | tr '\n' ' ')" "1 2 0 "
	expect_eq "files in .chunks" "$(wc -l <"$MNT/.chunks")" 180
	stop_daemon
	# --merge: the shards' members form one tree, the original train/.
	rm -rf "$CACHE"
	"$DLCACHE" snapshot --tar "$shards" "$WORK/merged.snapshot" --merge >/dev/null ||
		fail "snapshot --tar --merge"
	start_daemon_from "$shards" "snapshot=$WORK/merged.snapshot"
	expect_eq "merged tree" "$(compare_tree "$SRC/train" "$MNT")" 180
	# Tar records no size for directories: compare the files' lines.
	expect_eq "merged listing" "$(listing "$MNT" | grep -v ' d$')" \
		"$(listing "$SRC/train" | grep -v ' d$')"
	stop_daemon
	# The same member in two shards is refused when merging.
	tar -cf "$shards/again.tar" -C "$SRC/train" n00000000
	out=$("$DLCACHE" snapshot --tar "$shards" "$WORK/dup.snapshot" --merge 2>&1) &&
		fail "a duplicate member was accepted"
	echo "$out" | grep -q "appears in shards 'again.tar' and 'shard-000000.tar'" ||
		fail "no sentence for the duplicate: $out"
	[ -e "$WORK/dup.snapshot" ] && fail "a refused index left a snapshot"
	return 0
}

test_snapshot_tar_leaves_out_a_member_path_too_long_for_a_snapshot() {
	local shards=$WORK/long out deep
	mkdir -p "$shards" "$WORK/longtree"
	# A pax shard: 17 directories of 250 bytes, the deepest members past 4096 bytes.
	deep=$(python3 - "$WORK/longtree" <<'PY'
import os, sys
os.chdir(sys.argv[1])
for level in range(17):
    name = ("%02d" % level) + "d" * 248
    os.mkdir(name)
    os.chdir(name)
    open("file", "w").write("level %d\n" % level)
print(sys.argv[1])
PY
)
	tar --format=pax -cf "$shards/shard-000000.tar" -C "$deep" .
	out=$("$DLCACHE" snapshot --tar "$shards" 2>&1) || fail "snapshot --tar refused the shard: $out"
	echo "$out" | grep -q "over the 4095 a snapshot holds, is left out" || fail "no warning: $out"
	start_daemon_from "$shards"
	expect_eq "a shallow member" "$(cat "$MNT/shard-000000/00$(printf 'd%.0s' $(seq 248))/file")" "level 0"
	local kept
	kept=$(find "$MNT/shard-000000" -name file 2>/dev/null | wc -l)
	[ "$kept" -ge 10 ] && [ "$kept" -lt 17 ] || fail "members kept: $kept"
	stop_daemon
	python3 -c 'import shutil, sys; shutil.rmtree(sys.argv[1])' "$WORK/longtree"
}

# kill_pack_when FILE SIGNAL: starts a pack of a larger tree and sends SIGNAL
# once FILE appears in its destination; prints the pack's exit status.
kill_pack_when() {
	local pid rc=0
	"$DLCACHE" pack "$WORK/big" "$WORK/big-packed" --chunk-size 1M >/dev/null 2>&1 &
	pid=$!
	for _ in $(seq 1 2000); do
		[ -e "$WORK/big-packed/$1" ] && break
		sleep 0.005
	done
	[ -e "$WORK/big-packed/$1" ] || fail "the pack never wrote $1"
	kill "-$2" "$pid"
	wait "$pid" || rc=$?
	echo "$rc"
}

test_an_interrupted_pack_leaves_no_snapshot() {
	mkdir -p "$WORK/big"
	for i in $(seq 1 60); do head -c 1048576 /dev/urandom >"$WORK/big/f$i"; done
	expect_eq "exit status after SIGTERM" "$(kill_pack_when chunk-000002.tar.tmp TERM)" 130
	expect_eq "left after SIGTERM" "$(ls -A "$WORK/big-packed")" ""
	expect_eq "exit status after SIGKILL" "$(kill_pack_when chunk-000002.tar.tmp KILL)" 137
	[ -e "$WORK/big-packed/dlcache.snapshot" ] && fail "a killed pack left a snapshot"
	# Without a snapshot the directory is no packed source; packing again works.
	"$DLCACHE" pack "$WORK/big" "$WORK/big-packed" --chunk-size 1M >/dev/null ||
		fail "pack after a killed pack"
	start_daemon_from "$WORK/big-packed"
	expect_eq "files after the second pack" "$(compare_tree "$WORK/big" "$MNT")" 60
}

run_tests
