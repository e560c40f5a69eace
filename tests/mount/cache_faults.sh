#!/usr/bin/env bash
# Faults of the cache: cache files and directories changed behind the
# daemon while mounted, an index that is missing, damaged or lies, a power
# cut that loses the WAL, kill -9 during heavy admission, and a disk full
# before the mount.  Whatever happens, no wrong byte is served, the cache
# stays within cache_size, and what survives is reused.  (capacity.sh has
# the disk that fills while mounted; persist.sh a file corrupted between
# mounts and a first kill -9.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_lib.sh"

# 40 files of exactly 16 KiB, so that cache files can be swapped.
mkdir -p "$SRC/train/c"
for i in $(seq -w 0 39); do head -c 16384 /dev/urandom >"$SRC/train/c/f$i"; done
"$DLCACHE" snapshot "$SRC" -o "$WORK/snap.db" >/dev/null
SNAP="snapshot=$WORK/snap.db"

cache_file() {   # cache_file N: the cache file of train/c/fN, as store.h names it
	python3 - "$CACHE" "train/c/f$1" <<'PY'
import ctypes, sys
lib = ctypes.CDLL("libxxhash.so.0")
lib.XXH3_64bits.restype = ctypes.c_uint64
path = sys.argv[2].encode()
name = "%016x" % lib.XXH3_64bits(path, len(path))
print("%s/data/%s/%s" % (sys.argv[1], name[:2], name))
PY
}
data_files() { find "$CACHE/data" -type f | wc -l; }
data_bytes() { find "$CACHE/data" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }

# fill_and_unmount: one mount that caches all 40 files, closed cleanly.
fill_and_unmount() {
	start_daemon "$SNAP"
	expect_eq "files read to fill the cache" "$(read_all_shuffled)" 40
	expect_eq "entries" "$(stat_value cache.entries)" 40
	stop_daemon
}

test_cache_files_changed_while_mounted_are_never_served() {
	ALLOWED_LOG='cached copy of .* dropped'
	start_daemon "$SNAP"
	read_all_shuffled >/dev/null
	drop_caches
	read_all_shuffled >/dev/null    # first hits: every file checked, then spliced
	expect_eq "hits" "$(stat_value hits)" 40
	local f
	rm "$(cache_file 00)" "$(cache_file 01)"
	truncate -s 8000 "$(cache_file 02)"
	truncate -s 0 "$(cache_file 03)"
	printf 'XXXX' | dd of="$(cache_file 04)" bs=1 seek=9000 conv=notrunc status=none
	touch "$(cache_file 05)"           # new stamp, same bytes: checked again, kept
	# Two entries' files swapped (same size, each other's bytes).
	mv "$(cache_file 06)" "$WORK/swap" && mv "$(cache_file 07)" "$(cache_file 06)" &&
		mv "$WORK/swap" "$(cache_file 07)"
	# Replaced by a symlink and by a hard link to other entries' files.
	f=$(cache_file 08) && rm "$f" && ln -s "$(cache_file 30)" "$f"
	f=$(cache_file 09) && rm "$f" && ln "$(cache_file 31)" "$f"
	drop_caches
	expect_eq "files read after the damage" "$(read_all_shuffled)" 40
	expect_eq "corrupt (10 damaged, the touched one kept)" "$(stat_value corrupt)" 9
	expect_eq "misses (refetched)" "$(stat_value misses)" $((40 + 9))
	drop_caches
	read_all_shuffled >/dev/null
	expect_eq "entries after refetching" "$(stat_value cache.entries)" 40
	expect_eq "corrupt after a clean pass" "$(stat_value corrupt)" 9
	expect_eq "cache files" "$(data_files)" 40
}

# A file this mount wrote is served by the stamp its insert took, with no
# read-back: anything that changes it behind the daemon must bring the
# check back, before its first hit as after one.
test_files_this_mount_wrote_changed_behind_it_are_never_served() {
	ALLOWED_LOG='cached copy of .* dropped'
	start_daemon "$SNAP"
	read_all_shuffled >/dev/null    # misses: every file admitted, none read back
	expect_eq "hits before the damage" "$(stat_value hits)" 0
	printf 'XXXX' | dd of="$(cache_file 10)" bs=1 seek=9000 conv=notrunc status=none
	truncate -s 8000 "$(cache_file 11)"
	mv "$(cache_file 12)" "$WORK/swap" && mv "$(cache_file 13)" "$(cache_file 12)" &&
		mv "$WORK/swap" "$(cache_file 13)"
	touch "$(cache_file 14)"           # new stamp, same bytes: checked, kept
	drop_caches
	expect_eq "files read after the damage" "$(read_all_shuffled)" 40
	expect_eq "corrupt (4 damaged, the touched one kept)" "$(stat_value corrupt)" 4
	expect_eq "hits (36 good entries)" "$(stat_value hits)" 36
	drop_caches
	read_all_shuffled >/dev/null
	expect_eq "corrupt after a clean pass" "$(stat_value corrupt)" 4
	expect_eq "cache files" "$(data_files)" 40
}

test_cache_directories_removed_while_mounted_are_made_again() {
	ALLOWED_LOG='cached copy of .* dropped|was removed while mounted: made again'
	start_daemon "$SNAP"
	read_all_shuffled >/dev/null
	rm -rf "$CACHE/data" "$CACHE/tmp"
	drop_caches
	expect_eq "files read" "$(read_all_shuffled)" 40
	expect_eq "admission stays on" "$(stat_value cache.admission)" true
	drop_caches
	read_all_shuffled >/dev/null
	expect_eq "hits once cached again" "$(stat_value hits)" 40
	expect_eq "cache files" "$(data_files)" 40
	expect_eq "one warning for the layout" "$(grep -c 'made again' "$LOG")" 1
}

# check_remount DAMAGE KEPT: after fill_and_unmount and DAMAGE (a command),
# a remount reuses KEPT entries (or, with KEPT "any", some), serves every
# byte right, keeps no file outside the index, and all 40 are cached after.
check_remount() {
	fill_and_unmount
	eval "$1"
	start_daemon "$SNAP"
	local kept
	kept=$(stat_value cache.entries)
	[ "$2" = any ] || expect_eq "entries reused after '$1'" "$kept" "$2"
	expect_eq "cache files without a row ($1)" "$(data_files)" "$kept"
	expect_eq "files read ($1)" "$(read_all_shuffled)" 40
	expect_eq "hits ($1)" "$(stat_value hits)" $((kept - $(stat_value corrupt)))
	expect_eq "entries after one pass ($1)" "$(stat_value cache.entries)" 40
	stop_daemon
	rm -rf "$CACHE"
}

test_a_missing_damaged_or_lying_index_never_serves_wrong_bytes() {
	ALLOWED_LOG='index.db is unusable|cannot read the whole cache index|cached copy of .* dropped|database disk image is malformed|admission is off until remount'
	check_remount 'rm -f "$CACHE"/index.db*' 0
	check_remount 'head -c 32768 /dev/urandom >"$CACHE/index.db"' 0
	check_remount 'truncate -s 12288 "$CACHE/index.db"' any
	# Rows that lie: a wrong hash is caught by the first read of each file,
	# a wrong size at the restore (it disagrees with the snapshot).
	check_remount 'sqlite3 "$CACHE/index.db" "UPDATE entries SET hash = hash + 1 WHERE rowid % 4 = 0"' 40
	check_remount 'sqlite3 "$CACHE/index.db" "UPDATE entries SET size = size + 1 WHERE rowid % 5 = 0"' 32
	check_remount 'sqlite3 "$CACHE/index.db" "UPDATE entries SET mtime_ns = 7 WHERE rowid % 8 = 0"' 35
	# A clean index whose entries page is damaged: the load fails after the
	# open, so this mount goes on without its entries and admits nothing
	# (the index cannot take a row); the next mount sets it aside and
	# deletes the files no index lists.
	fill_and_unmount
	local page
	page=$(sqlite3 "$CACHE/index.db" "SELECT rootpage FROM sqlite_master WHERE name = 'entries'")
	head -c 4096 /dev/urandom | dd of="$CACHE/index.db" bs=4096 seek=$((page - 1)) conv=notrunc status=none
	start_daemon "$SNAP"
	expect_eq "files read with a damaged entries page" "$(read_all_shuffled)" 40
	expect_eq "corrupt" "$(stat_value corrupt)" 0
	expect_eq "hits" "$(stat_value hits)" 0
	[ "$(data_files)" -le 40 ] || fail "cache files grew with a damaged index: $(data_files)"
	stop_daemon
	start_daemon "$SNAP"
	expect_eq "entries after the damaged index is set aside" "$(stat_value cache.entries)" 0
	expect_eq "cache files after the damaged index is set aside" "$(data_files)" 0
	expect_eq "files read" "$(read_all_shuffled)" 40
	expect_eq "entries" "$(stat_value cache.entries)" 40
}

test_a_power_cut_that_loses_the_wal_keeps_nothing_outside_the_index() {
	ALLOWED_LOG='^$'
	fill_and_unmount
	start_daemon "$SNAP,cache_size=256K,policy=lru"   # holds 16: evicts and admits
	read_all_shuffled >/dev/null
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	rm -f "$CACHE/index.db-wal" "$CACHE/index.db-shm"
	: >"$LOG"
	start_daemon "$SNAP,cache_size=256K,policy=lru"
	local kept
	kept=$(stat_value cache.entries)
	expect_eq "cache files without a row" "$(data_files)" "$kept"
	[ "$(data_bytes)" -le $((256 * 1024)) ] || fail "cache files exceed cache_size: $(data_bytes)"
	expect_eq "files read" "$(read_all_shuffled)" 40
	expect_eq "corrupt" "$(stat_value corrupt)" 0
}

test_kill_9_during_heavy_admission_then_remount_reuses_the_cache() {
	ALLOWED_LOG='cached copy of .* dropped'
	local round readers r kept reused=0
	for round in 1 2 3; do
		# 8 readers, a cache for 16 of the 40 files: admissions and evictions
		# all the time, and ranks written meanwhile.
		start_daemon "$SNAP,cache_size=256K,source_delay=2ms"
		readers=()
		for r in $(seq 8); do
			(for _ in 1 2 3; do read_all_shuffled; done) >/dev/null 2>&1 &
			readers+=($!)
		done
		python3 - "$MNT" <<'PY' &
import random, sys, time
for _ in range(200):
    try:
        with open(sys.argv[1] + "/.control", "w") as f:
            f.writelines("%f train/c/f%02d\n" % (random.random(), i) for i in range(40))
    except OSError:
        break
    time.sleep(0.01)
PY
		readers+=($!)
		sleep "0.$((3 + RANDOM % 7))"
		kill -9 "$DAEMON_PID"
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=
		for r in "${readers[@]}"; do wait_gone "$r" 20 "a reader after kill -9"; done
		wait
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
		# A power cut tears the file written last and a bit of another.
		local newest other
		newest=$(find "$CACHE/data" -type f -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2)
		other=$(find "$CACHE/data" -type f | sort | head -n 1)
		[ -n "$newest" ] && truncate -s 5000 "$newest"
		[ -n "$other" ] && [ "$other" != "$newest" ] &&
			printf 'Z' | dd of="$other" bs=1 seek=100 conv=notrunc status=none
		: >"$LOG"
		# freeze: no miss of this pass may evict an entry before it is read.
		start_daemon "$SNAP,cache_size=256K,policy=freeze"
		kept=$(stat_value cache.entries)
		reused=$((reused + kept))
		expect_eq "cache files without a row (round $round)" "$(data_files)" "$kept"
		[ "$(data_bytes)" -le $((256 * 1024)) ] || fail "cache files exceed cache_size: $(data_bytes)"
		expect_eq "files read (round $round)" "$(read_all_shuffled)" 40
		[ "$(stat_value corrupt)" -le 1 ] || fail "corrupt in round $round: $(stat_value corrupt)"
		expect_eq "hits = entries kept and good (round $round)" "$(stat_value hits)" \
			$((kept - $(stat_value corrupt)))
		stop_daemon
	done
	[ "$reused" -gt 0 ] || fail "no cache entry survived three kill -9"
	echo "entries reused after kill -9 in 3 rounds: $reused"
}

test_a_cache_disk_full_before_the_mount_lets_reads_go_on() {
	mkdir -p "$CACHE"
	mount -t tmpfs -o size=1m,mode=0700 tmpfs "$CACHE" || { echo "SKIP: cannot mount tmpfs"; return 0; }
	EXTRA_MOUNTS+=("$CACHE")
	ALLOWED_LOG='^$'
	start_daemon "$SNAP,cache_size=512K"
	read_all_shuffled >/dev/null
	local cached
	cached=$(stat_value cache.entries)
	stop_daemon
	# Another process fills the disk to the last block.
	head -c 2M /dev/zero >"$CACHE/filler" 2>/dev/null || true
	ALLOWED_LOG='cache disk under .* is full|cannot save the scores|cannot .* No space left'
	start_daemon "$SNAP,cache_size=512K"
	expect_eq "files read with a full disk" "$(read_all_shuffled)" 40
	expect_eq "admission" "$(stat_value cache.admission)" false
	stop_daemon
	# With room again, the cache of the mount before is whole.
	rm -f "$CACHE/filler"
	ALLOWED_LOG='^$'
	start_daemon "$SNAP,cache_size=512K"
	expect_eq "entries once the disk has room" "$(stat_value cache.entries)" "$cached"
	read_all_shuffled >/dev/null
	expect_eq "hits" "$(stat_value hits)" "$cached"
	stop_daemon
	umount "$CACHE"
}

test_a_dataset_changed_between_mounts_is_refetched_after_refresh() {
	ALLOWED_LOG='^$'
	start_daemon
	read_all_shuffled >/dev/null
	stop_daemon
	# Same size, new bytes and a new mtime.
	head -c 16384 /dev/urandom >"$SRC/train/c/f11"
	head -c 16384 /dev/urandom >"$SRC/train/c/f12"
	start_daemon "refresh"
	expect_eq "entries kept (two changed)" "$(stat_value cache.entries)" 38
	expect_eq "files read" "$(read_all_shuffled)" 40
	expect_eq "misses (the changed files)" "$(stat_value misses)" 2
	stop_daemon
	"$DLCACHE" snapshot "$SRC" -o "$WORK/snap.db" >/dev/null
}

run_tests
