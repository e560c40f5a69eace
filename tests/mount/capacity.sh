#!/usr/bin/env bash
# The cache is bounded: policies, capacity, a full cache disk.
. "$(dirname "$0")/lib.sh"

# 100 files of 16 KiB exactly: each is charged 16 KiB (4 KiB blocks).
mkdir -p "$SRC/train/c"
for i in $(seq -w 0 99); do head -c 16384 /dev/urandom >"$SRC/train/c/f$i"; done

cache_files_bytes() {
	find "$CACHE/data" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'
}

test_freeze_fills_once_and_never_evicts() {
	start_daemon "policy=freeze,cache_size=400K"
	read_all_shuffled >/dev/null
	expect_eq "entries" "$(stat_value cache.entries)" 25
	expect_eq "cache bytes" "$(stat_value cache.bytes)" $((400 * 1024))
	expect_eq "evictions" "$(stat_value evictions)" 0
	expect_eq "bypasses" "$(stat_value bypasses)" 75
	read_all_shuffled >/dev/null
	expect_eq "hits in epoch 2" "$(stat_value hits)" 25
	[ "$(cache_files_bytes)" -le $((400 * 1024)) ] || fail "cache files exceed cache_size"
	expect_eq "cache file count" "$(find "$CACHE/data" -type f | wc -l)" 25
}

test_the_disk_stays_within_capacity_while_the_cache_churns() {
	# LRU over 4 readers churns the cache; a watcher (watch_cache_start in
	# lib.sh) sums the bytes of the cache files all through the churn, not
	# only at the end.
	start_daemon "policy=lru,cache_size=400K,threads=8"
	watch_cache_start 60
	local r readers=()
	for r in 1 2 3 4; do
		{ read_all_shuffled && read_all_shuffled && read_all_shuffled; } >/dev/null &
		readers+=($!)
	done
	for r in "${readers[@]}"; do wait "$r" || fail "a reader failed"; done
	watch_cache_stop
	[ "$WATCH_SAMPLES" -ge 20 ] || fail "the watcher took only $WATCH_SAMPLES samples"
	[ "$WATCH_PEAK" -le $((400 * 1024)) ] || fail "the cache files reached $WATCH_PEAK bytes during churn, over 409600"
	[ "$(stat_value evictions)" -gt 50 ] || fail "no churn: $(stat_value evictions) evictions"
	echo "peak $WATCH_PEAK bytes over $WATCH_SAMPLES samples, $(stat_value evictions) evictions"
}

test_lru_evicts_and_stays_within_capacity() {
	start_daemon "policy=lru,cache_size=400K"
	read_all_shuffled >/dev/null
	read_all_shuffled >/dev/null
	expect_eq "entries" "$(stat_value cache.entries)" 25
	local hits misses
	hits=$(stat_value hits)
	misses=$(stat_value misses)
	expect_eq "hits + misses" $((hits + misses)) 200
	expect_eq "evictions" "$(stat_value evictions)" $((misses - 25))
	[ "$(cache_files_bytes)" -le $((400 * 1024)) ] || fail "cache files exceed cache_size"
	expect_eq "cache file count" "$(find "$CACHE/data" -type f | wc -l)" 25
	# A file just read is cached; reading it again is a hit.
	cat "$MNT/train/c/f07" >/dev/null
	hits=$(stat_value hits)
	cat "$MNT/train/c/f07" >/dev/null
	expect_eq "hits after re-reading a recent file" "$(stat_value hits)" $((hits + 1))
}

test_none_caches_nothing() {
	start_daemon "policy=none"
	read_all_shuffled >/dev/null
	expect_eq "entries" "$(stat_value cache.entries)" 0
	expect_eq "bypasses" "$(stat_value bypasses)" 100
	expect_eq "cache files" "$(find "$CACHE/data" -type f | wc -l)" 0
}

test_a_full_cache_disk_turns_admission_off_and_reads_go_on() {
	mkdir -p "$CACHE"
	mount -t tmpfs -o size=512k,mode=0700 tmpfs "$CACHE" || { echo "SKIP: cannot mount tmpfs"; return 0; }
	EXTRA_MOUNTS+=("$CACHE")
	ALLOWED_LOG='cache disk under .* is full|SQLite rolled back|cannot save the scores to .*: No space left on device'
	start_daemon "cache_size=100M"
	expect_eq "files read with a full cache disk" "$(read_all_shuffled)" 100
	expect_eq "admission" "$(stat_value cache.admission)" false
	expect_eq "bytes from remote" "$(stat_value bytes_from_remote)" $((100 * 16384))
	expect_eq "files read again" "$(read_all_shuffled)" 100
	local entries
	entries=$(stat_value cache.entries)
	[ "$entries" -gt 0 ] && [ "$entries" -lt 100 ] || fail "entries with a full disk: $entries"
	expect_eq "hits equal cached entries" "$(stat_value hits)" "$entries"
	stop_daemon
	ALLOWED_LOG='^$'
	umount "$CACHE"
}

test_admission_resumes_once_a_full_cache_disk_has_room() {
	mkdir -p "$CACHE"
	mount -t tmpfs -o size=1m,mode=0700 tmpfs "$CACHE" || { echo "SKIP: cannot mount tmpfs"; return 0; }
	EXTRA_MOUNTS+=("$CACHE")
	# Something else fills the disk: only ~300 KiB are left for the cache.
	head -c 600K /dev/zero >"$CACHE/filler"
	ALLOWED_LOG='cache disk under .* is full|SQLite rolled back|cannot save the scores to .*: No space left on device'
	start_daemon "cache_size=100M"
	expect_eq "files read with a full cache disk" "$(read_all_shuffled)" 100
	expect_eq "admission while full" "$(stat_value cache.admission)" false
	local before
	before=$(stat_value admissions)
	rm -f "$CACHE/filler"
	sleep 6     # admission pauses 5 s after the disk was found full
	expect_eq "files read after room was made" "$(read_all_shuffled)" 100
	local after
	after=$(stat_value admissions)
	[ "$after" -gt $((before + 10)) ] || fail "admissions did not resume: $before then $after"
	stop_daemon
	ALLOWED_LOG='^$'
	umount "$CACHE"
}

run_tests
