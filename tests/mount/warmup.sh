#!/usr/bin/env bash
# `dlcache warmup`: a list, a directory and --top N are announced and read
# through a real mount; afterwards the files are in .cached and a job's
# opens of them are hits.  A cache too small for the list reports the
# refused files (and fails when it admitted nothing); bad input (not a
# mount, a missing list, a list naming nothing) gives one sentence and a
# non-zero status; on a terminal the progress line is rewritten in place.
. "$(dirname "$0")/lib.sh"

# 4 classes of 30 files of about 8 KB (each charged 8 or 12 KiB).
make_dataset "$SRC" 4 30 8000
CLASS0=train/n00000000
CLASS1=train/n00000001

# warmup ARGS...: runs dlcache warmup; its stdout in $WORK/out, its stderr
# in $WORK/err, its status in $STATUS.
warmup() {
	STATUS=0
	"$DLCACHE" warmup "$@" >"$WORK/out" 2>"$WORK/err" || STATUS=$?
}

# in_cached PATH: whether .cached lists PATH.
in_cached() {
	grep -Fxq "$1" "$MNT/.cached"
}

# files_of DIR: the paths of DIR's files relative to $SRC, sorted.
files_of() {
	(cd "$SRC" && find "$1" -type f | sort)
}

# opens_are_hits PATH...: opening and reading each file again counts one hit
# each and no miss.
opens_are_hits() {
	local hits misses p
	drop_caches
	hits=$(stat_value hits)
	misses=$(stat_value misses)
	for p in "$@"; do
		cmp -s "$MNT/$p" "$SRC/$p" || fail "$p read after warmup differs from the source"
	done
	expect_eq "misses after warmup" "$(stat_value misses)" "$misses"
	expect_eq "hits after warmup" "$(stat_value hits)" $((hits + $#))
}

test_a_list_is_cached_and_read_as_hits() {
	start_daemon
	files_of "$CLASS0" >"$WORK/list"
	# An absolute path inside the mount and a repeat are accepted.
	echo "$MNT/$CLASS1/n00000001_0.JPEG" >>"$WORK/list"
	echo "$CLASS0/n00000000_0.JPEG" >>"$WORK/list"
	warmup "$MNT" "$WORK/list"
	expect_eq "warmup's status (stderr: $(cat "$WORK/err"))" "$STATUS" 0
	grep -q '^  admitted: 31 files' "$WORK/out" || fail "warmup did not report 31 files admitted: $(cat "$WORK/out")"
	! grep -q refused "$WORK/out" || fail "warmup refused files with room in the cache: $(cat "$WORK/out")"
	local p
	for p in $(files_of "$CLASS0") "$CLASS1/n00000001_0.JPEG"; do
		in_cached "$p" || fail "$p is not in .cached after warmup"
	done
	expect_eq "cached entries" "$(grep -c . "$MNT/.cached")" 31
	opens_are_hits $(files_of "$CLASS0")
	# Standard input, the same list again: everything was cached before.
	warmup "$MNT" - <"$WORK/list"
	expect_eq "warmup - status" "$STATUS" 0
	grep -q '^  cached before: 31 files' "$WORK/out" || fail "a second warmup did not see 31 files cached before: $(cat "$WORK/out")"
}

test_a_directory_is_walked() {
	start_daemon
	warmup "$MNT/$CLASS1"
	expect_eq "warmup DIR status (stderr: $(cat "$WORK/err"))" "$STATUS" 0
	local p
	for p in $(files_of "$CLASS1"); do
		in_cached "$p" || fail "$p of the warmed directory is not in .cached"
	done
	expect_eq "cached entries" "$(grep -c . "$MNT/.cached")" 30
	opens_are_hits $(files_of "$CLASS1")
	# MOUNT DIR: the same through the second argument, for another class.
	warmup "$MNT" "$MNT/train/n00000002"
	expect_eq "warmup MOUNT DIR status" "$STATUS" 0
	expect_eq "cached entries" "$(grep -c . "$MNT/.cached")" 60
}

test_top_n_warms_the_highest_scores() {
	start_daemon
	control "$(printf '%s\n' "0.9 $CLASS0/n00000000_3.JPEG" "0.7 $CLASS1/n00000001_4.JPEG" \
		"0.8 $CLASS1/n00000001_5.JPEG" "0.2 $CLASS0/n00000000_6.JPEG" "0.1 $CLASS0/n00000000_7.JPEG")" >/dev/null
	expect_eq ".scores lines" "$(grep -c . "$MNT/.scores")" 5
	# Like .cached, it grows with the dataset: only .control's owner reads it.
	expect_eq "mode of .scores" "$(stat -c %a "$MNT/.scores")" 400
	grep -Fxq "0.899999976 $CLASS0/n00000000_3.JPEG" "$MNT/.scores" ||
		fail ".scores does not give the score written: $(cat "$MNT/.scores")"
	warmup "$MNT" --top 3
	expect_eq "warmup --top status (stderr: $(cat "$WORK/err"))" "$STATUS" 0
	sort "$MNT/.cached" >"$WORK/cached"
	printf '%s\n' "$CLASS0/n00000000_3.JPEG" "$CLASS1/n00000001_4.JPEG" "$CLASS1/n00000001_5.JPEG" |
		sort | diff - "$WORK/cached" >/dev/null || fail "--top 3 cached $(cat "$WORK/cached")"
	opens_are_hits "$CLASS0/n00000000_3.JPEG" "$CLASS1/n00000001_5.JPEG"
	# With a directory: its 2 highest-scored files.
	warmup "$MNT/$CLASS0" --top 2
	expect_eq "warmup DIR --top status" "$STATUS" 0
	in_cached "$CLASS0/n00000000_6.JPEG" || fail "--top 2 of $CLASS0 did not warm its second score"
	! in_cached "$CLASS0/n00000000_7.JPEG" || fail "--top 2 of $CLASS0 warmed its third score"
}

test_a_small_cache_reports_what_it_refused() {
	# Files of 16 KiB exactly (each charged 16 KiB) and room for ten: the
	# first class fills the cache to the byte.  The second class's files
	# are larger than the whole cache, so that none of them can get in
	# whatever the policy makes of the first class's.  With b as small as
	# a, some of b got in once under ASan on a loaded machine (CI of
	# 6fca76d); the policy's cause was not traced, and this test is about
	# warmup's report, not the policy.
	local d i admitted refused
	mkdir -p "$WORK/even/a" "$WORK/even/b"
	for i in $(seq -w 0 29); do
		head -c 16384 /dev/urandom >"$WORK/even/a/f$i"
		head -c 200000 /dev/urandom >"$WORK/even/b/f$i"
	done
	start_daemon_from "$WORK/even" "cache_size=160K"
	warmup "$MNT/a"
	expect_eq "warmup status with some room (stderr: $(cat "$WORK/err"))" "$STATUS" 0
	admitted=$(sed -n 's/^  admitted: \([0-9]*\) files.*/\1/p' "$WORK/out")
	refused=$(sed -n 's/^  refused: \([0-9]*\) files.*/\1/p' "$WORK/out")
	[ -n "$admitted" ] && [ -n "$refused" ] && [ "$admitted" -gt 0 ] && [ "$refused" -gt 0 ] ||
		fail "warmup into a small cache reported no admitted and refused files: $(cat "$WORK/out")"
	expect_eq "admitted + refused" $((admitted + refused)) 30
	expect_eq "admitted to a cache of ten" "$admitted" 10
	expect_eq "admitted = .cached" "$admitted" "$(grep -c . "$MNT/.cached")"
	grep -q 'refused: .*is full' "$WORK/out" || fail "the refusal gives no reason: $(cat "$WORK/out")"
	# Nothing of the other class fits: warmup says so in one sentence.
	warmup "$MNT/b"
	expect_eq "warmup status with no room" "$STATUS" 1
	expect_eq "stderr lines" "$(wc -l <"$WORK/err")" 1
	grep -q '^dlcache warmup: nothing was admitted: the cache refused all 30 files' "$WORK/err" ||
		fail "no reason for nothing admitted: $(cat "$WORK/err")"
}

test_bad_input_gives_one_sentence() {
	start_daemon
	warmup "$WORK"
	expect_eq "warmup of a directory that is not a mount" "$STATUS" 1
	expect_eq "stderr lines" "$(wc -l <"$WORK/err")" 1
	grep -q 'is not a dlcache mount' "$WORK/err" || fail "not a mount: $(cat "$WORK/err")"
	warmup "$MNT" "$WORK/no-such-list"
	expect_eq "warmup of a missing list" "$STATUS" 1
	expect_eq "stderr lines" "$(wc -l <"$WORK/err")" 1
	grep -q 'cannot read the list' "$WORK/err" || fail "missing list: $(cat "$WORK/err")"
	printf 'not/in/the/dataset\n\n' >"$WORK/list"
	warmup "$MNT" "$WORK/list"
	expect_eq "warmup of a list naming nothing" "$STATUS" 1
	expect_eq "stderr lines" "$(wc -l <"$WORK/err")" 1
	grep -q 'names no regular file of the dataset (first: not/in/the/dataset)' "$WORK/err" ||
		fail "list naming nothing: $(cat "$WORK/err")"
	warmup "$MNT" --top 0
	expect_eq "warmup --top 0" "$STATUS" 2
	warmup "$MNT" --top 2
	expect_eq "warmup --top without scores" "$STATUS" 1
	grep -q 'knows no scores yet' "$WORK/err" || fail "--top without scores: $(cat "$WORK/err")"
	expect_eq "cached entries after bad input" "$(grep -c . "$MNT/.cached" || true)" 0
}

test_progress_on_a_terminal_and_the_timeout() {
	# A slow source, so that the reads take long enough for progress lines.
	start_daemon "source_delay=10ms"
	python3 - "$DLCACHE" "$MNT" >"$WORK/tty" <<'PY' || fail "warmup on a terminal failed: $(cat "$WORK/tty")"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "warmup", sys.argv[2] + "/train", "--threads", "2"])
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r\n", "\n").replace("\r", "<CR>"))
sys.exit(os.waitstatus_to_exitcode(status))
PY
	grep -q '<CR>warmup: [0-9]*/120 files, [0-9.]*/[0-9.]* MiB, [0-9.]* MiB/s, ETA [0-9]* s' "$WORK/tty" ||
		fail "no progress line rewritten in place on a terminal: $(head -c 600 "$WORK/tty")"
	grep -q '^  admitted: 120 files' "$WORK/tty" || fail "no result after the progress: $(tail -n 3 "$WORK/tty")"
	stop_daemon
	rm -rf "$CACHE"
	start_daemon "source_delay=50ms"
	warmup "$MNT" --timeout 0.3 --threads 1
	expect_eq "warmup status on timeout" "$STATUS" 1
	grep -q '^dlcache warmup: timed out after 0.3 s' "$WORK/err" || fail "no timeout sentence: $(cat "$WORK/err")"
	grep -q '^  not read: ' "$WORK/out" || fail "the timeout does not say what was not read: $(cat "$WORK/out")"
}

run_tests
