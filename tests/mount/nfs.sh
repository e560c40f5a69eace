#!/usr/bin/env bash
# NFS sources over a real server: a private nfs-ganesha exports $SRC over
# NFSv4 on 127.0.0.1, and dlcache mounts it with libnfs (no kernel NFS client).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ganesha.sh"

make_dataset "$SRC" 8 40 20000
mkdir -p "$SRC/nested/a/b/c" "$SRC/empty dir" "$SRC/ünïcode name"
echo "deep" >"$SRC/nested/a/b/c/deep.txt"
echo "hello" >"$SRC/ünïcode name/a file.txt"
: >"$SRC/empty"
: >"$SRC/nested/a/empty too"
head -c $((1536 * 1024 + 17)) /dev/urandom >"$SRC/nested/one_and_a_half_mib.bin"
head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$SRC/five_mib.bin"
ln -s train/n00000000/n00000000_0.JPEG "$SRC/link"
ln -s /etc/passwd "$SRC/outside"
DLC_SOURCE=$NFS_SOURCE
# What a failed remote read logs; only the restart test provokes them.
EIO_LOG='^dlcache: warning: [a-z_]+: (cannot read .* from the source|read from the source failed|cannot open .* on the source): Input/output error$'

ensure_ganesha() {
	ganesha_running || start_ganesha "$SRC" "${1:-}"
}

# cmp_all: every regular file of $SRC, byte for byte through $MNT.
cmp_all() {
	local n=0 f
	while IFS= read -r -d '' f; do
		cmp "$MNT/$f" "$SRC/$f" || fail "bytes differ: $f"
		n=$((n + 1))
	done < <(cd "$SRC" && find . -type f -print0)
	echo "$n"
}

# listing DIR: what a reader sees of the tree, one sorted line per entry.
listing() {
	(cd "$1" && find . -printf '%y %s %m %U %G %T@ %p %l\n' | sort)
}

test_bytes_are_the_exports_and_no_metadata_call_after_mount() {
	ensure_ganesha
	start_daemon
	expect_eq "files compared" "$(cmp_all)" "$(find "$SRC" -type f | wc -l)"
	[ -L "$MNT/link" ] || fail "link is not shown as a link"
	expect_eq "readlink" "$(readlink "$MNT/link")" "train/n00000000/n00000000_0.JPEG"
	expect_eq "outside link" "$(readlink "$MNT/outside")" "/etc/passwd"
	expect_eq "empty dir" "$(ls -A "$MNT/empty dir" | wc -l)" 0
	find "$MNT" -exec stat {} + >/dev/null
	ls -laR "$MNT" >/dev/null
	expect_eq "remote metadata calls" "$(stat_value remote_ops.metadata)" 0
	expect_eq "remote list calls" "$(stat_value remote_ops.list)" 0
	expect_eq "remote stat calls" "$(stat_value remote_ops.stat)" 0
	expect_eq "remote errors" "$(stat_value remote_ops.errors)" 0
	expect_eq "snapshot entries" "$(stat_value snapshot.entries)" "$(find "$SRC" | wc -l)"
}

test_large_files_read_by_range_over_nfs() {
	ensure_ganesha
	start_daemon "cache_max_file=1M"
	cmp "$MNT/five_mib.bin" "$SRC/five_mib.bin" || fail "5 MiB file read by range"
	cmp "$MNT/nested/one_and_a_half_mib.bin" "$SRC/nested/one_and_a_half_mib.bin" ||
		fail "1.5 MiB file read by range"
	python3 - "$MNT/five_mib.bin" "$SRC/five_mib.bin" <<'PY' || fail "random ranges"
import os, random, sys
a, b = open(sys.argv[1], "rb", buffering=0), open(sys.argv[2], "rb")
size = os.path.getsize(sys.argv[2])
for _ in range(100):
    off, n = random.randrange(size + 10), random.randrange(1, 3 << 20)
    a.seek(off); b.seek(off)
    assert a.read(n) == b.read(n), (off, n)
PY
	# Files over cache_max_file are cached by blocks (4 MiB): 2 + 1 blocks,
	# written after they are served; then read again with no source read.
	local reads
	for _ in $(seq 1 100); do
		[ "$(stat_value block_admissions)" -ge 3 ] && break
		sleep 0.05
	done
	expect_eq "blocks admitted" "$(stat_value block_admissions)" 3
	reads=$(stat_value remote_ops.read)
	drop_caches
	cmp "$MNT/five_mib.bin" "$SRC/five_mib.bin" || fail "5 MiB file read from its blocks"
	cmp "$MNT/nested/one_and_a_half_mib.bin" "$SRC/nested/one_and_a_half_mib.bin" ||
		fail "1.5 MiB file read from its block"
	expect_eq "source reads for files cached by blocks" "$(stat_value remote_ops.read)" "$reads"
}

test_a_server_that_caps_reads_below_one_mib_still_gives_every_byte() {
	stop_ganesha
	start_ganesha "$SRC" "MaxRead = 65536;"
	start_daemon "cache_max_file=2M"
	cmp_all >/dev/null
	stop_daemon
	stop_ganesha
}

test_connections_idle_past_their_lease_reconnect_without_an_error() {
	# libnfs 4.0 never renews an NFSv4 lease: after an idle lease period the
	# server forgets the client, and the next OPEN fails until the driver
	# makes the connection again.
	stop_ganesha
	start_ganesha "$SRC" "" "Lease_Lifetime = 2;"
	ALLOWED_LOG='^dlcache: info: '
	start_daemon "log_level=info"
	cmp "$MNT/train/n00000000/n00000000_1.JPEG" "$SRC/train/n00000000/n00000000_1.JPEG" || fail "bytes"
	sleep 5
	cmp "$MNT/train/n00000000/n00000000_2.JPEG" "$SRC/train/n00000000/n00000000_2.JPEG" ||
		fail "bytes after an idle lease period"
	grep -q "dropped this client's NFSv4 state" "$LOG" || fail "the lease did not expire"
	expect_eq "remote errors" "$(stat_value remote_ops.errors)" 0
	stop_daemon
	stop_ganesha
}

test_the_crawl_is_parallel_and_matches_the_directory_driver() {
	local nfs_listing dir_listing connections
	ensure_ganesha
	start_daemon "crawl_threads=8"
	# Connections are made lazily, one more whenever every open one is busy,
	# and kept until unmount: more than one means listings ran at once.
	connections=$(ss -Htn state established "( dport = :$GANESHA_PORT )" | wc -l)
	echo "connections to the server after the crawl: $connections"
	[ "$connections" -ge 2 ] || fail "the crawl used $connections connection(s) to the server"
	nfs_listing=$(listing "$MNT")
	stop_daemon
	rm -rf "$CACHE"
	DLC_SOURCE=$SRC start_daemon
	dir_listing=$(listing "$MNT")
	[ "$nfs_listing" = "$dir_listing" ] ||
		fail "NFS and directory snapshots differ: $(diff <(echo "$nfs_listing") <(echo "$dir_listing") | head)"
	expect_eq "entries" "$(echo "$nfs_listing" | wc -l)" "$(find "$SRC" | wc -l)"
}

test_a_server_restart_fails_only_the_reads_in_flight() {
	ALLOWED_LOG=$EIO_LOG
	ensure_ganesha
	start_daemon "cache_max_file=1M,policy=none"
	# Two readers of the 5 MiB file, which is read by range from the server:
	# one re-opens it each time, one keeps one descriptor open across the
	# restart.  Both drop the file's pages first, so that every read reaches
	# the server.  Every read must give the right bytes or EIO.
	python3 - "$MNT/five_mib.bin" "$SRC/five_mib.bin" "$WORK/stop" >"$WORK/readers.out" <<'PY' &
import errno, os, sys, threading, time
mounted, source, stop = sys.argv[1:]
want = open(source, "rb").read()
counts = {"ok": 0, "eio": 0, "kept_ok_after": 0}
lock = threading.Lock()
def check(data, off):
    assert data == want[off:off + len(data)] and len(data) > 0, "wrong bytes at %d" % off
def reopening():
    while not os.path.exists(stop):
        try:
            with open(mounted, "rb", buffering=0) as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                check(f.read(), 0)
            with lock: counts["ok"] += 1
        except OSError as e:
            assert e.errno == errno.EIO, e
            with lock: counts["eio"] += 1
            time.sleep(0.01)
def keeping():
    fd = os.open(mounted, os.O_RDONLY)
    off = 0
    while not os.path.exists(stop):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            check(os.pread(fd, 1 << 20, off), off)
            with lock: counts["ok"] += 1
        except OSError as e:
            assert e.errno == errno.EIO, e
            with lock: counts["eio"] += 1
            time.sleep(0.01)
        off = (off + 777777) % (len(want) - 1)
    # After the restart, the descriptor opened before it still reads.
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    check(os.pread(fd, 1 << 20, 4096), 4096)
    os.close(fd)
threads = [threading.Thread(target=t) for t in (reopening, keeping)]
for t in threads: t.start()
for t in threads: t.join()
print(counts["ok"], counts["eio"])
PY
	local readers=$!
	sleep 1
	stop_ganesha
	sleep 1
	start_ganesha "$SRC"
	sleep 2
	touch "$WORK/stop"
	wait "$readers" || fail "a reader got wrong bytes or another error than EIO"
	read -r ok eio <"$WORK/readers.out"
	echo "reads during the restart: $ok good, $eio failed with EIO; $(stat_value remote_ops.read) reads from the server"
	[ "$ok" -gt 0 ] && [ "$eio" -gt 0 ] || fail "the outage was not seen"
	# Every file, read for the first time after the restart, arrives whole.
	expect_eq "files compared after the restart" "$(cmp_all)" "$(find "$SRC" -type f | wc -l)"
	kill -0 "$DAEMON_PID" || fail "the daemon died"
}

test_unmount_does_not_hang_when_the_server_is_gone() {
	ensure_ganesha
	start_daemon "cache_max_file=1M"
	cmp "$MNT/nested/a/b/c/deep.txt" "$SRC/nested/a/b/c/deep.txt" || fail "bytes"
	stop_ganesha
	# A read now fails at once (the server refuses connections), and the
	# unmount and the daemon's exit take no time.
	ALLOWED_LOG=$EIO_LOG
	timeout 10 cat "$MNT/train/n00000003/n00000003_5.JPEG" >/dev/null 2>&1 &&
		fail "a read succeeded with the server gone"
	timeout 5 fusermount3 -u "$MNT" || fail "fusermount3 -u failed or hung"
	local waited=0
	while kill -0 "$DAEMON_PID" 2>/dev/null; do
		[ "$waited" -lt 50 ] || fail "the daemon did not exit within 5 s of the unmount"
		sleep 0.1
		waited=$((waited + 1))
	done
	wait "$DAEMON_PID" || fail "the daemon exited with an error"
	DAEMON_PID=
	check_log
}

# expect_mount_refused SECONDS WORD SOURCE [OPTIONS]: the mount fails within
# SECONDS with one line that contains WORD, and mounts nothing.
expect_mount_refused() {
	local seconds=$1 word=$2 source=$3 opts=${4:-} out rc=0
	out=$(timeout "$seconds" "$DLCACHE" mount "$source" "$MNT" \
		-o "cache_dir=$CACHE${opts:+,$opts}" 2>&1 >/dev/null) || rc=$?
	[ "$rc" -ne 124 ] || fail "mounting $source hung for $seconds s"
	[ "$rc" -ne 0 ] || fail "mounted $source"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "more than one line for $source: $out"
	printf '%s\n' "$out" | grep -q -- "$word" || fail "$source said '$out', expected '$word'"
	mountpoint -q "$MNT" && fail "mounted anyway: $source"
	rm -rf "$CACHE"
}

test_a_packed_source_on_the_server_mounts_as_its_tree() {
	# dlcache pack into the export: its snapshot is copied to the cache
	# directory at mount, once, and the chunks are read over NFS.
	ensure_ganesha
	local tree=$WORK/tree packed=$SRC/packed copy ino
	make_dataset "$tree" 4 25 20000
	"$DLCACHE" pack "$tree" "$packed" --chunk-size 256K >/dev/null 2>"$WORK/pack.err" ||
		fail "pack: $(cat "$WORK/pack.err")"
	local nchunks
	nchunks=$(find "$packed" -name 'chunk-*.tar' | wc -l)
	start_daemon_from "nfs://127.0.0.1/export/packed?version=4&nfsport=$GANESHA_PORT"
	diff -r "$tree" "$MNT" >/dev/null || fail "the packed source over NFS differs from its tree"
	[ -e "$MNT/chunk-000000.tar" ] && fail "the chunks are shown instead of the tree"
	expect_eq "source opens: one per chunk" "$(stat_value remote_ops.open)" "$nchunks"
	expect_eq "remote metadata calls" "$(stat_value remote_ops.metadata)" 0
	expect_eq ".chunks lines" "$(wc -l <"$MNT/.chunks")" "$(find "$tree" -type f | wc -l)"
	stop_daemon
	copy=$CACHE/snapshot.db
	cmp "$copy" "$packed/dlcache.snapshot" || fail "the local copy differs from the source's snapshot"
	ino=$(stat -c %i "$copy")
	start_daemon_from "nfs://127.0.0.1/export/packed?version=4&nfsport=$GANESHA_PORT"
	expect_eq "the copy is reused" "$(stat -c %i "$copy")" "$ino"
	cmp "$MNT/train/n00000001/n00000001_3.JPEG" "$tree/train/n00000001/n00000001_3.JPEG" ||
		fail "bytes after a remount"
	stop_daemon
	# Packed again: the source's snapshot changed, the copy follows it.
	rm -rf "$packed"
	echo "new" >"$tree/new file"
	"$DLCACHE" pack "$tree" "$packed" --chunk-size 256K >/dev/null 2>&1 || fail "second pack"
	start_daemon_from "nfs://127.0.0.1/export/packed?version=4&nfsport=$GANESHA_PORT"
	expect_eq "the new file" "$(cat "$MNT/new file")" new
	stop_daemon
	rm -rf "$packed"
}

# After the snapshot, directories become symlinks to directories outside the
# dataset that hold the same names and sizes but other bytes: a class
# directory (relative link), and "nested/a", the first of three components
# above a file.  libnfs follows a symlink before the last component; the
# driver must not: every read through them fails, no wrong byte is served
# or cached, and the mount goes on.
test_a_directory_swapped_for_a_link_after_the_snapshot_is_never_followed() {
	local class=train/n00000003 wrong
	ensure_ganesha
	ALLOWED_LOG='^dlcache: warning: [a-z_]+: cannot read .* from the source: Too many levels of symbolic links$'
	start_daemon
	rm -rf "$WORK/saved" "$SRC/elsewhere"
	mkdir -p "$WORK/saved" "$SRC/elsewhere/class" "$SRC/elsewhere/a/b/c"
	for f in "$SRC/$class"/*; do
		head -c "$(stat -c %s "$f")" /dev/urandom >"$SRC/elsewhere/class/${f##*/}"
	done
	echo "DEEP" >"$SRC/elsewhere/a/b/c/deep.txt"
	mv "$SRC/$class" "$WORK/saved/class"
	mv "$SRC/nested/a" "$WORK/saved/a"
	ln -s ../elsewhere/class "$SRC/$class"
	ln -s ../elsewhere/a "$SRC/nested/a"
	wrong=$(python3 - "$MNT" "$WORK/saved" "$class" <<'PY'
import errno, os, sys
mnt, saved, cls = sys.argv[1:]
pairs = [(os.path.join(cls, n), os.path.join(saved, "class", n))
         for n in sorted(os.listdir(os.path.join(saved, "class")))]
pairs.append(("nested/a/b/c/deep.txt", os.path.join(saved, "a/b/c/deep.txt")))
wrong_bytes, served = 0, []
for rel, original in pairs:
    want = open(original, "rb").read()
    try:
        with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
            got = f.read()
    except OSError as e:
        if e.errno not in (errno.EIO, errno.ELOOP):
            sys.exit(f"{rel}: {e}")
        continue
    served.append(rel)
    wrong_bytes += sum(a != b for a, b in zip(got, want)) + abs(len(got) - len(want))
print(f"{len(served)} {wrong_bytes}")
PY
) || fail "reading through the links"
	expect_eq "reads served through links, wrong bytes" "$wrong" "0 0"
	expect_eq "cache entries" "$(stat_value cache.entries)" 0
	expect_eq "remote errors" "$(stat_value remote_errors)" 41
	cmp "$MNT/five_mib.bin" "$SRC/five_mib.bin" || fail "the mount after the refused reads"
	rm "$SRC/$class" "$SRC/nested/a"
	mv "$WORK/saved/class" "$SRC/$class"
	mv "$WORK/saved/a" "$SRC/nested/a"
	rm -rf "$SRC/elsewhere"
}

test_bad_host_export_or_port_fails_at_mount_time_in_one_sentence() {
	local silent_port
	ensure_ganesha
	expect_mount_refused 10 "has no export or directory '/nope'" \
		"nfs://127.0.0.1/nope?version=4&nfsport=$GANESHA_PORT"
	expect_mount_refused 10 "has no export or directory '/export/nope'" \
		"nfs://127.0.0.1/export/nope?nfsport=$GANESHA_PORT"
	expect_mount_refused 10 "is not a directory" \
		"nfs://127.0.0.1/export/empty?nfsport=$GANESHA_PORT"
	expect_mount_refused 30 "is not a known host" "no-such-host.invalid:/export"
	stop_ganesha
	expect_mount_refused 10 "refuses connections on port $GANESHA_PORT" "$NFS_SOURCE"
	# A server that accepts the connection and never answers.
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$WORK/silent.port" &
	local silent=$!
	until [ -s "$WORK/silent.port" ]; do sleep 0.05; done
	silent_port=$(cat "$WORK/silent.port")
	expect_mount_refused 10 "did not answer within 1 s" \
		"nfs://127.0.0.1:$silent_port/export" "nfs_timeout=1s"
	kill "$silent"
	wait "$silent" 2>/dev/null || true
}

run_tests
