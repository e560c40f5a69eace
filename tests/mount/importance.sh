#!/usr/bin/env bash
# Importance-aware caching through the mount: ranks written to .control
# decide what stays cached; bad control lines fail with EINVAL and lose
# nothing; .cached lists the cache; scores survive a remount.
. "$(dirname "$0")/lib.sh"

# 100 files of exactly 16 KiB: each is charged 16 KiB, so 400K holds 25.
mkdir -p "$SRC/train/c"
for i in $(seq -w 0 99); do head -c 16384 /dev/urandom >"$SRC/train/c/f$i"; done
# Symlinks: to a file, to a directory, a chain; out of the dataset, dangling, a loop.
mkdir -p "$SRC/links"
ln -s ../train/c/f01 "$SRC/links/l01"
ln -s ../train/c "$SRC/links/cdir"
ln -s l01 "$SRC/links/chain"
ln -s /etc/passwd "$SRC/links/abs"
ln -s ../../outside "$SRC/links/up"
ln -s ../train/c/nope "$SRC/links/dangling"
ln -s loop2 "$SRC/links/loop1"
ln -s loop1 "$SRC/links/loop2"

cached_list() { sort "$MNT/.cached" | tr '\n' ' ' | sed 's/ $//'; }
names() { for i in "$@"; do printf 'train/c/f%s ' "$i"; done | sed 's/ $//'; }
wait_stat() {   # wait_stat NAME VALUE: release runs after close returns
	# Up to ~20 s: under the sanitizers on a loaded 2-core machine a prefetch
	# worker's turn can take seconds (a value that never comes still fails).
	for _ in $(seq 1 400); do
		[ "$(stat_value "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	fail "$1: got '$(stat_value "$1")', expected '$2'"
}

# Forked workers write ranks through one inherited descriptor, each in
# pieces, and close it at their own pace: no close cuts another's line.
test_control_shared_by_forked_workers() {
	start_daemon
	python3 - "$MNT" <<'PY' || fail "forked writers"
import os, sys, time
m = sys.argv[1]
fd = os.open(m + "/.control", os.O_WRONLY)
children = []
for w in range(4):
    pid = os.fork()
    if pid == 0:
        for i in range(w * 20, w * 20 + 20):
            os.write(fd, ("%d train/c/f%02d\n" % (i + 1, i)).encode())
        os.close(fd)                   # a duplicate's close: a flush, no release
        os._exit(0)
    children.append(pid)
for pid in children:
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
dup = os.dup(fd)
os.write(dup, b"99 train/c/f9")       # a line split across a dup's close
os.close(dup)
os.write(fd, b"9\n")
os.write(fd, b"7 train/c/f80")        # unterminated: applied at the last close
os.close(fd)
PY
	wait_stat scored_samples 82
	expect_eq "control errors" "$(stat_value control_errors)" 0
}

# A symlink inside the dataset to a file inside it is that file.
test_symlinked_samples_score_their_targets() {
	start_daemon "cache_size=400K"
	ALLOWED_LOG='\.control: line'
	expect_eq "link, link to a dir, chain" \
		"$(control $'7 links/l01\n8 links/cdir/f02\n9 links/chain\n')" ok
	expect_eq "scored through links" "$(stat_value scored_samples)" 2
	expect_eq "prefetch and forget through links" \
		"$(control $'forget links/chain\nprefetch links/cdir/f03\n')" ok
	expect_eq "scored after forget" "$(stat_value scored_samples)" 1
	local bad cause
	for bad in abs:outside up:outside dangling:dangling loop1:loop; do
		expect_eq "links/${bad%%:*}" "$(control "1 links/${bad%%:*}"$'\n')" EINVAL
		cause=$(stat_value last_error)
		case "$cause" in
		*"${bad#*:}"*) ;;
		*) fail "links/${bad%%:*}: cause '$cause' does not say ${bad#*:}" ;;
		esac
	done
	expect_eq "scored after the bad links" "$(stat_value scored_samples)" 1
}

read_files() { for i in "$@"; do cat "$MNT/train/c/f$i" >/dev/null; done; }

test_ranks_keep_exactly_the_top_samples_that_fit() {
	start_daemon "cache_size=400K"
	expect_eq "policy" "$(stat_value policy)" importance
	local lines="" i
	for i in $(seq -w 0 99); do lines+="$((10#$i)) train/c/f$i"$'\n'; done
	expect_eq "writing 100 ranks" "$(control "$lines")" ok
	expect_eq "scored samples" "$(stat_value scored_samples)" 100
	read_all_shuffled >/dev/null
	drop_caches
	read_all_shuffled >/dev/null
	expect_eq "cached set" "$(cached_list)" "$(names $(seq 75 99))"
	expect_eq "entries" "$(stat_value cache.entries)" 25
	expect_eq "hits in the second epoch" "$(stat_value hits)" 25
	# A miss is answered before its cache insert (fetch.c), and evictions
	# are counted when an admission is decided, admissions once written:
	# the last insert may still be writing, so the counts settle first.
	local admissions evictions tries=0
	while :; do
		admissions=$(stat_value admissions)
		evictions=$(stat_value evictions)
		[ "$evictions" = $((admissions - 25)) ] || [ $((tries += 1)) -gt 50 ] && break
		sleep 0.1
	done
	expect_eq "evictions = admissions - 25" "$evictions" $((admissions - 25))
	expect_eq "bypasses" "$(stat_value bypasses)" $((200 - 25 - admissions))
}

test_evictions_are_the_lowest_ranked_and_unknown_never_evicts() {
	start_daemon "cache_size=400K"
	# No scores yet: the first 25 files read fill the cache (freeze).
	read_files $(seq -w 0 24)
	expect_eq "filled" "$(stat_value cache.entries)" 25
	local lines="" i
	for i in $(seq -f %02g 0 9); do lines+="1 train/c/f$i"$'\n'; done
	for i in $(seq -w 10 24); do lines+="5 train/c/f$i"$'\n'; done
	for i in $(seq -w 50 59); do lines+="3 train/c/f$i"$'\n'; done
	lines+="2 train/c/f30"$'\n'
	expect_eq "ranks" "$(control "$lines")" ok
	read_files $(seq -w 50 59)
	expect_eq "evictions" "$(stat_value evictions)" 10
	expect_eq "cached set after the score-3 reads" "$(cached_list)" \
		"$(names $(seq -w 10 24) $(seq -w 50 59))"
	# f30 (score 2) is below every cached score; f60 has no score: neither evicts.
	read_files 30 60
	expect_eq "evictions after lower and unknown reads" "$(stat_value evictions)" 10
	expect_eq "bypasses" "$(stat_value bypasses)" 2
	# Raising f30 above the minimum lets it in on its next read, in a new
	# pass (f50's second read starts it), in which f50 is the one cached
	# entry already read: f30 evicts it.
	expect_eq "rescore" "$(control $'9 train/c/f30\n')" ok
	drop_caches
	read_files 50 30
	expect_eq "evictions after the rescore" "$(stat_value evictions)" 11
	grep -qx "train/c/f30" "$MNT/.cached" || fail "f30 not cached after its rescore"
	! grep -qx "train/c/f50" "$MNT/.cached" || fail "f50 still cached"
	# An announced epoch: nothing cached is read in it yet, so even the
	# highest-ranked miss bypasses rather than evict a sure hit...
	expect_eq "epoch and rank" "$(control $'epoch 7\n10 train/c/f61\n')" ok
	local bypasses
	bypasses=$(stat_value bypasses)
	read_files 61
	expect_eq "evictions in a fresh epoch" "$(stat_value evictions)" 11
	expect_eq "bypasses in a fresh epoch" "$(stat_value bypasses)" $((bypasses + 1))
	# ...until a lower-ranked cached sample has been read in it (f10, 5).
	drop_caches
	read_files 10 61
	expect_eq "evictions once f10 was read" "$(stat_value evictions)" 12
	grep -qx "train/c/f61" "$MNT/.cached" || fail "f61 not cached after f10's read"
	! grep -qx "train/c/f10" "$MNT/.cached" || fail "f10 still cached"
}

test_bad_lines_fail_with_einval_and_good_lines_around_them_apply() {
	start_daemon "cache_size=400K"
	ALLOWED_LOG='\.control: line'
	local long
	long="1 train/c/$(head -c 9000 /dev/zero | tr '\0' x)"
	local bad
	for bad in "nan train/c/f01" "inf train/c/f01" "1e999 train/c/f01" "0x10 train/c/f01" \
		"1.0 ../etc/passwd" "1.0 train/../../etc/passwd" "1.0 nosuchfile" "1.0 train/c" \
		"bogus" "epoch x" "reset now" "12abc train/c/f01" "1.0" "$long"; do
		expect_eq "good, bad ('${bad:0:40}'), good" \
			"$(control "1 train/c/f01"$'\n'"$bad"$'\n'"2 train/c/f02"$'\n')" EINVAL
	done
	expect_eq "the good lines applied" "$(stat_value scored_samples)" 2
	expect_eq "control errors" "$(stat_value control_errors)" 14
	expect_eq "control lines" "$(stat_value control_lines)" $((14 * 3))
	stat_value last_error | grep -q '^line 2:' || fail "last_error: $(stat_value last_error)"
	# An unterminated last line is applied at the final release (after
	# close returns): a bad one is counted, a good one applied.
	expect_eq "bad tail" "$(control $'3 train/c/f03\nnan train/c/f04')" ok
	wait_stat control_errors 15
	expect_eq "good tail" "$(control $'3 train/c/f05\n4 train/c/f06')" ok
	wait_stat scored_samples 5
	# The daemon is alive and nothing cached was lost.
	read_files 01 02
	expect_eq "entries" "$(stat_value cache.entries)" 2
}

test_control_opens_the_way_people_write_files() {
	start_daemon
	echo "1 train/c/f01" >"$MNT/.control" || fail "echo >"
	echo "2 train/c/f02" >>"$MNT/.control" || fail "echo >>"
	printf '3 /train/c/f03\n4 %s/train/c/f04\n' "$MNT" >"$MNT/.control" || fail "absolute paths"
	python3 - "$MNT" <<'PY' || fail "python writes"
import os, sys
m = sys.argv[1]
with open(m + "/.control", "w") as f:          # O_CREAT|O_TRUNC
    for i in range(5, 10):
        f.write("%d train/c/f%02d\n" % (i, i))
fd = os.open(m + "/.control", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"10 train/c/f1")                 # one line split over two writes
os.write(fd, b"0\n# a comment\n\n")
os.close(fd)
PY
	expect_eq "scored samples" "$(stat_value scored_samples)" 10
	expect_eq "mode of .control" "$(stat -c %a "$MNT/.control")" 600
	expect_eq "epoch" "$(control $'epoch 3\n')" ok
	expect_eq "epoch in stats" "$(stat_value epoch)" 3
	expect_eq "forget" "$(control $'forget train/c/f01\n')" ok
	expect_eq "scored after forget" "$(stat_value scored_samples)" 9
	expect_eq "reset" "$(control $'reset\n')" ok
	expect_eq "scored after reset" "$(stat_value scored_samples)" 0
}

test_only_the_owner_writes_control_even_with_allow_other() {
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; return 0; }
	chmod -R o+rX "$SRC" "$WORK"
	start_daemon "allow_other"
	local f=train/c/f07
	setpriv --reuid=65534 --regid=65534 --clear-groups cat "$MNT/$f" | cmp - "$SRC/$f" \
		|| fail "another user cannot read the data"
	if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo '1 $f' > '$MNT/.control'" 2>/dev/null; then
		fail "another user wrote .control"
	fi
	expect_eq "scored samples" "$(stat_value scored_samples)" 0
	# .cached and .chunks grow with the dataset: only the owner reads them,
	# so another user cannot fill memory_limit with open renderings.
	expect_eq "mode of .cached and .chunks" "$(stat -c '%u %a' "$MNT/.cached" "$MNT/.chunks" | sort -u)" "0 400"
	local v
	for v in .cached .chunks; do
		if setpriv --reuid=65534 --regid=65534 --clear-groups cat "$MNT/$v" >/dev/null 2>&1; then
			fail "another user read $v"
		fi
	done
	grep -qx "$f" "$MNT/.cached" || fail "the owner cannot read .cached"
}

test_control_uid_and_gid_hand_control_to_the_job() {
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; return 0; }
	chmod -R o+rX "$SRC" "$WORK"
	start_daemon "allow_other,control_uid=65534,control_gid=65533"
	expect_eq "owner and mode of .control" "$(stat -c '%u %g %a' "$MNT/.control")" "65534 65533 620"
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo '1 train/c/f01' >'$MNT/.control'" \
		|| fail "control_uid cannot write .control"
	setpriv --reuid=65532 --regid=65533 --clear-groups sh -c "echo '2 train/c/f02' >'$MNT/.control'" \
		|| fail "a member of control_gid cannot write .control"
	if setpriv --reuid=65532 --regid=65532 --clear-groups sh -c "echo '3 train/c/f03' >'$MNT/.control'" 2>/dev/null; then
		fail "a user outside control_uid and control_gid wrote .control"
	fi
	expect_eq "scored samples" "$(stat_value scored_samples)" 2
	# Those who steer the cache read .cached and .chunks; nobody else.
	cat "$MNT/train/c/f04" >/dev/null
	expect_eq "owner and mode of .cached" "$(stat -c '%u %g %a' "$MNT/.cached")" "65534 65533 440"
	setpriv --reuid=65534 --regid=65534 --clear-groups grep -qx train/c/f04 "$MNT/.cached" \
		|| fail "control_uid cannot read .cached"
	setpriv --reuid=65532 --regid=65533 --clear-groups cat "$MNT/.chunks" >/dev/null \
		|| fail "a member of control_gid cannot read .chunks"
	if setpriv --reuid=65532 --regid=65532 --clear-groups cat "$MNT/.cached" >/dev/null 2>&1; then
		fail "a user outside control_uid and control_gid read .cached"
	fi
}

test_scores_survive_a_remount() {
	start_daemon
	expect_eq "ranks" "$(control $'1 train/c/f01\n2 train/c/f02\n3 train/c/f03\n')" ok
	stop_daemon
	start_daemon
	expect_eq "scored samples after remount" "$(stat_value scored_samples)" 3
}

test_prefetch_fetches_in_the_background_through_admission() {
	start_daemon
	expect_eq "prefetch" "$(control $'prefetch train/c/f05\nprefetch train/c/f06\n')" ok
	for _ in $(seq 100); do
		[ "$(stat_value cache.entries)" = 2 ] && break
		sleep 0.05
	done
	expect_eq "cached after prefetch" "$(cached_list)" "train/c/f05 train/c/f06"
	expect_eq "prefetches" "$(stat_value prefetches)" 2
	expect_eq "misses" "$(stat_value misses)" 0
	read_files 05
	expect_eq "a prefetched file is a hit" "$(stat_value hits)" 1
	expect_eq "served from prefetched bytes" "$(stat_value prefetch_hits)" 1
}

test_prefetch_stays_a_bounded_window_ahead_of_the_reader() {
	start_daemon "prefetch_window=4,prefetch_threads=8,source_delay=5ms"
	local lines="" i
	for i in $(seq -w 0 59); do lines+="prefetch train/c/f$i"$'\n'; done
	expect_eq "announce 60 files" "$(control "$lines")" ok
	sleep 1
	# Nothing read yet: the prefetcher holds at most the window, and the
	# planner the whole order.
	expect_eq "prefetched before the reader starts" "$(stat_value prefetches)" 4
	expect_eq "announced lines held" "$(stat_value cache.announced)" 60
	for i in $(seq -w 0 59); do
		cmp "$MNT/train/c/f$i" "$SRC/train/c/f$i" || fail "bytes of f$i"
	done
	expect_eq "announced lines left once all are read" "$(stat_value cache.announced)" 0
	# A reader that catches up with the window joins the fetch in flight:
	# every file still comes from the source exactly once.
	[ "$(stat_value prefetch_hits)" -ge 4 ] || fail "prefetch hits: $(stat_value prefetch_hits)"
	expect_eq "hits + misses" $(($(stat_value hits) + $(stat_value misses))) 60
	expect_eq "source opens" "$(stat_value remote_ops.open)" 60
	expect_eq "entries" "$(stat_value cache.entries)" 60
}

test_prefetch_fetches_each_announced_file_once_for_readers_taking_turns() {
	# Two DataLoader-like workers share one announced order, each reading
	# every other file, one a few files ahead of the other at times.  With
	# policy=none the staged bytes are the only copy: one dropped is one
	# fetched twice.
	start_daemon "policy=none,prefetch_window=16,prefetch_threads=4,source_delay=2ms"
	local lines="" i
	for i in $(seq -w 0 99); do lines+="prefetch train/c/f$i"$'\n'; done
	expect_eq "announce 100 files" "$(control "$lines")" ok
	python3 - "$SRC" "$MNT" <<'PY' || fail "a worker read wrong bytes"
import os, sys, threading, time, random
src, mnt = sys.argv[1], sys.argv[2]
bad = []
def worker(parity, seed):
    rng = random.Random(seed)
    for i in range(parity, 100, 2):
        p = "train/c/f%02d" % i
        if open(os.path.join(mnt, p), "rb").read() != open(os.path.join(src, p), "rb").read():
            bad.append(p)
        time.sleep(rng.uniform(0, 0.01))
threads = [threading.Thread(target=worker, args=(k, k)) for k in (0, 1)]
for t in threads: t.start()
for t in threads: t.join()
sys.exit(1 if bad else 0)
PY
	expect_eq "source opens" "$(stat_value remote_ops.open)" 100
	expect_eq "hits + misses" $(($(stat_value hits) + $(stat_value misses))) 100
	[ "$(stat_value prefetch_hits)" -ge 50 ] || fail "prefetch hits: $(stat_value prefetch_hits)"
}

# residency resident|evict NN...: the pages of train/c/fNN's cache file
# in the page cache, or evicts them (tests/mount/residency.py).
residency() { python3 "$(dirname "$0")/residency.py" "$CACHE" "$@"; }
wait_resident() {   # wait_resident EXPECTED NN...: the advice's reads are asynchronous
	for _ in $(seq 1 500); do
		[ "$(residency resident "${@:2}")" = "$1" ] && return 0
		sleep 0.02
	done
	fail "pages of ${*:2}: $(residency resident "${@:2}"), expected $1"
}

test_prefetch_reads_announced_hits_ahead_a_window_at_a_time() {
	start_daemon "prefetch_window=4,prefetch_threads=2"
	local i all=()
	for i in $(seq -w 0 19); do
		cmp "$MNT/train/c/f$i" "$SRC/train/c/f$i" || fail "bytes of f$i"
		all+=("$i")
	done
	expect_eq "cached" "$(stat_value cache.entries)" 20
	residency evict "${all[@]}"
	expect_eq "evicted" "$(residency resident "${all[@]}")" "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
	local lines=""
	for i in "${all[@]}"; do lines+="prefetch train/c/f$i"$'\n'; done
	expect_eq "announce 20 hits" "$(control "$lines")" ok
	# The first window is read ahead at once; the rest waits for the reader.
	wait_stat warmed 4
	sleep 0.3
	expect_eq "read ahead before the reader starts" "$(stat_value warmed)" 4
	expect_eq "f04 on not read ahead" "$(residency resident "${all[@]:4}")" "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
	wait_resident "4 4 4 4" 00 01 02 03
	cmp "$MNT/train/c/f00" "$SRC/train/c/f00" || fail "bytes of f00"
	cmp "$MNT/train/c/f01" "$SRC/train/c/f01" || fail "bytes of f01"
	# Two opens move the reader on by two: two more are read ahead.
	wait_stat warmed 6
	wait_resident "4 4" 04 05
	expect_eq "f06 on not yet" "$(residency resident 06 07 08 19)" "0 0 0 0"
	expect_eq "no source fetches" "$(stat_value prefetches)" 0
}

test_prefetch_reads_ahead_every_announced_hit_through_a_full_warm_list() {
	# A window of 1: the warm list (8 windows) fills with the hits beyond
	# the first, and the workers leave the rest in the plan until it has
	# room; each read still brings exactly the next hit in.
	start_daemon "prefetch_window=1,prefetch_threads=4"
	local i k=0 lines=""
	for i in $(seq -w 0 19); do
		cmp "$MNT/train/c/f$i" "$SRC/train/c/f$i" || fail "bytes of f$i"
		lines+="prefetch train/c/f$i"$'\n'
	done
	expect_eq "announce 20 hits" "$(control "$lines")" ok
	wait_stat warmed 1
	for i in $(seq -w 0 18); do
		cmp "$MNT/train/c/f$i" "$SRC/train/c/f$i" || fail "bytes of f$i"
		k=$((k + 1))
		wait_stat warmed $((k + 1))
	done
	expect_eq "no source fetches" "$(stat_value prefetches)" 0
}

run_tests
