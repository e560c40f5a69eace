#!/usr/bin/env bash
# Bad command lines fail at once with one sentence that names the fix, and
# mount nothing.
. "$(dirname "$0")/lib.sh"

make_dataset "$SRC" 1 3 100
touch "$WORK/file"

# expect_refused WORD ARGS...: the mount fails, prints one line containing WORD.
expect_refused() {
	local word=$1 out rc=0
	shift
	out=$("$DLCACHE" mount "$@" 2>&1 >/dev/null) || rc=$?
	[ "$rc" -ne 0 ] || fail "accepted: $*"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "more than one line for '$*': $out"
	printf '%s\n' "$out" | grep -qi -- "$word" || fail "'$*' said '$out', expected it to mention '$word'"
	mountpoint -q "${REFUSED_MNT:-$MNT}" && fail "mounted anyway: $*"
	return 0
}

test_bad_command_lines_are_refused_with_one_sentence() {
	expect_refused "unknown mount option" "$SRC" "$MNT" -o "cache_dir=$CACHE,bogus=1"
	expect_refused "cache_size" "$SRC" "$MNT" -o "cache_dir=$CACHE,cache_size=lots"
	expect_refused "cache_size" "$SRC" "$MNT" -o "cache_dir=$CACHE,cache_size=0"
	expect_refused "policy" "$SRC" "$MNT" -o "cache_dir=$CACHE,policy=fifo"
	expect_refused "source" -o "cache_dir=$CACHE"
	expect_refused "mountpoint" "$SRC" -o "cache_dir=$CACHE"
	expect_refused "does not exist" "$WORK/nope" "$MNT" -o "cache_dir=$CACHE"
	expect_refused "does not exist" "$SRC" "$WORK/nomnt" -o "cache_dir=$CACHE"
	expect_refused "not a directory" "$SRC" "$WORK/file" -o "cache_dir=$CACHE"
	expect_refused "inside the mountpoint" "$SRC" "$MNT" -o "cache_dir=$MNT/cache"
	expect_refused "snapshot" "$SRC" "$MNT" -o "cache_dir=$CACHE,snapshot=$WORK/none.db"
	expect_refused "is not absolute" "fileserver:export" "$MNT" -o "cache_dir=$CACHE"
}

test_a_cache_dir_in_use_is_refused() {
	start_daemon
	mkdir -p "$WORK/mnt2"
	REFUSED_MNT=$WORK/mnt2 expect_refused "in use" "$SRC" "$WORK/mnt2" -o "cache_dir=$CACHE"
}

test_fstab_only_options_are_accepted() {
	start_daemon "_netdev,nofail,noauto,user,users,x-systemd.automount,x-systemd.requires=network.target,defaults,rw,nosuid,nodev"
	expect_eq "mounted with fstab options" "$(cat "$MNT/train/n00000000/n00000000_0.JPEG" | wc -c)" \
		"$(stat -c %s "$SRC/train/n00000000/n00000000_0.JPEG")"
}

test_a_broken_snapshot_file_is_refused() {
	echo "not a database" >"$WORK/bad.db"
	expect_refused "snapshot" "$SRC" "$MNT" -o "cache_dir=$CACHE,snapshot=$WORK/bad.db"
}

run_tests
