#!/usr/bin/env bash
# The cache outlives the mount: reuse after remount, corruption caught,
# background mount, snapshots built ahead of time and refreshed.
. "$(dirname "$0")/lib.sh"

make_dataset "$SRC" 4 25 30000

test_cache_is_reused_after_remount() {
	start_daemon
	read_all_shuffled >/dev/null
	expect_eq "entries after first mount" "$(stat_value cache.entries)" 100
	stop_daemon
	start_daemon
	expect_eq "entries after remount" "$(stat_value cache.entries)" 100
	read_all_shuffled >/dev/null
	expect_eq "hits after remount" "$(stat_value hits)" 100
	expect_eq "misses after remount" "$(stat_value misses)" 0
	expect_eq "remote opens after remount" "$(stat_value remote_ops.open)" 0
	expect_eq "lifetime misses" "$(stat_value lifetime.misses)" 100
	expect_eq "lifetime hits" "$(stat_value lifetime.hits)" 100
}

test_a_corrupted_cache_file_is_never_served() {
	start_daemon
	read_all_shuffled >/dev/null
	stop_daemon
	local victim
	victim=$(find "$CACHE/data" -type f | sort | sed -n 1p)
	[ -n "$victim" ] || fail "no cache file to corrupt"
	printf 'CORRUPT' | dd of="$victim" bs=1 seek=100 conv=notrunc status=none
	local gone
	gone=$(find "$CACHE/data" -type f | sort | sed -n 2p)
	rm -f "$gone"
	ALLOWED_LOG='cached copy of .* dropped'
	start_daemon
	expect_eq "files read" "$(read_all_shuffled)" 100
	expect_eq "corrupt entries counted" "$(stat_value corrupt)" 2
	expect_eq "misses (the two dropped entries)" "$(stat_value misses)" 2
	expect_eq "hits" "$(stat_value hits)" 98
	stop_daemon
	ALLOWED_LOG='^$'
}

test_a_cache_file_corrupted_while_mounted_is_checked_again() {
	start_daemon
	local f=train/n00000001/n00000001_4.JPEG
	cat "$MNT/$f" >/dev/null       # miss: admitted
	cat "$MNT/$f" >/dev/null       # first hit: read whole and checked
	cat "$MNT/$f" >/dev/null       # later hits: spliced from the checked file
	expect_eq "hits" "$(stat_value hits)" 2
	local victim
	victim=$(find "$CACHE/data" -type f | sed -n 1p)
	printf 'XXXX' | dd of="$victim" bs=1 seek=10 conv=notrunc status=none
	drop_caches
	ALLOWED_LOG='cached copy of .* dropped'
	cmp "$MNT/$f" "$SRC/$f" || fail "served a cache file corrupted while mounted"
	expect_eq "corrupt" "$(stat_value corrupt)" 1
	expect_eq "misses" "$(stat_value misses)" 2
	stop_daemon
	ALLOWED_LOG='^$'
}

test_background_mount_returns_when_ready_and_umount_flushes() {
	"$DLCACHE" mount "$SRC" "$MNT" -o "cache_dir=$CACHE,log_level=warning" 2>>"$LOG" \
		|| fail "background mount failed"
	# No waiting: the mount must answer as soon as the command returns.
	mountpoint -q "$MNT" || fail "not mounted when mount.dlcache returned"
	[ -e "$MNT/.stats" ] || fail ".stats missing right after mount"
	read_all_shuffled >/dev/null
	umount "$MNT" || fail "umount failed"
	# The daemon flushes its index, unlocks the cache and exits by itself.
	for _ in $(seq 100); do
		flock -n "$CACHE/lock" true && break
		sleep 0.1
	done
	flock -n "$CACHE/lock" true || fail "the daemon still holds the cache 10 s after umount"
	expect_eq "rows in the index after umount" \
		"$(sqlite3 "$CACHE/index.db" 'SELECT count(*) FROM entries')" 100
	expect_eq "clean flag" "$(sqlite3 "$CACHE/index.db" "SELECT value FROM meta WHERE key='clean'")" 1
}

test_snapshot_built_ahead_and_refresh() {
	"$DLCACHE" snapshot "$SRC" -o "$WORK/snap.db" >/dev/null || fail "dlcache snapshot failed"
	echo new >"$SRC/added.txt"
	start_daemon "snapshot=$WORK/snap.db"
	[ ! -e "$MNT/added.txt" ] || fail "a file added after the snapshot is visible without refresh"
	expect_eq "remote metadata calls with a ready snapshot" "$(stat_value remote_ops.metadata)" 0
	stop_daemon
	start_daemon "snapshot=$WORK/snap.db,refresh"
	expect_eq "added file after refresh" "$(cat "$MNT/added.txt")" new
	stop_daemon
	rm -f "$SRC/added.txt"
}

test_a_cache_dir_reused_for_another_source_serves_only_its_bytes() {
	# Two datasets with one path, one size and one mtime, other bytes.
	local b=$WORK/src-b f=train/n00000001/n00000001_2.JPEG
	mkdir -p "$b/${f%/*}" "$b/only-in-b"
	head -c "$(stat -c %s "$SRC/$f")" /dev/urandom >"$b/$f"
	touch -r "$SRC/$f" "$b/$f"
	echo b >"$b/only-in-b/x"
	start_daemon
	cat "$MNT/$f" >/dev/null
	expect_eq "entries after reading a" "$(stat_value cache.entries)" 1
	stop_daemon
	"$DLCACHE" snapshot "$SRC" -o "$WORK/snap-a.db" >/dev/null || fail "dlcache snapshot failed"

	# The cache_dir's own snapshot is rebuilt for b; a's cached bytes go.
	ALLOWED_LOG='^$'
	start_daemon_from "$b" "log_level=warning"
	[ -e "$MNT/only-in-b/x" ] || fail "the mount of b shows a's tree"
	cmp "$MNT/$f" "$b/$f" || fail "the mount of b served a's cached bytes"
	expect_eq "entries restored from a's cache" "$(stat_value hits)" 0
	stop_daemon

	# A snapshot named with snapshot= that was built from a is refused.
	if "$DLCACHE" mount "$b" "$MNT" -o "cache_dir=$CACHE,snapshot=$WORK/snap-a.db" 2>"$WORK/err"; then
		fusermount3 -u "$MNT"
		fail "a snapshot of another source was accepted"
	fi
	grep -q "was built from $SRC, not from $b" "$WORK/err" ||
		fail "expected one sentence naming both sources, got: $(cat "$WORK/err")"
	mountpoint -q "$MNT" && fail "refused mount left a mount behind"
	rm -rf "$b"
}

test_a_file_changed_behind_the_snapshot_fails_with_eio() {
	start_daemon
	local f=train/n00000002/n00000002_1.JPEG
	cp -p "$SRC/$f" "$WORK/saved"
	echo "grown" >>"$SRC/$f"
	ALLOWED_LOG='changed size on the source'
	if cat "$MNT/$f" >/dev/null 2>"$WORK/err"; then
		fail "reading a file that changed size succeeded"
	fi
	grep -q 'Input/output error' "$WORK/err" || fail "expected EIO, got: $(cat "$WORK/err")"
	expect_eq "remote errors" "$(stat_value remote_errors)" 1
	cp -p "$WORK/saved" "$SRC/$f"
	stop_daemon
	ALLOWED_LOG='^$'
}

test_kill_9_during_admission_leaves_a_cache_that_serves_only_good_bytes() {
	# 100 misses of 3 delayed calls each take 3 s; the index commits every second.
	start_daemon "source_delay=10ms"
	read_all_shuffled >/dev/null 2>&1 &
	local reader=$! i
	# Killed once the index has committed an entry (a loaded machine may
	# take longer than a second to get there), while misses still run.
	for i in $(seq 1 200); do
		[ "$(sqlite3 "$CACHE/index.db" 'SELECT count(*) FROM entries' 2>/dev/null || echo 0)" -gt 0 ] && break
		sleep 0.05
	done
	sleep 0.2
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	wait "$reader" 2>/dev/null || true
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	: >"$LOG"
	start_daemon
	local kept
	kept=$(stat_value cache.entries)
	[ "$kept" -gt 0 ] || fail "no cache entry survived kill -9"
	expect_eq "files read after kill -9" "$(read_all_shuffled)" 100
	expect_eq "corrupt entries" "$(stat_value corrupt)" 0
	expect_eq "hits are the surviving entries" "$(stat_value hits)" "$kept"
}

run_tests
