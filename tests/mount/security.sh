#!/usr/bin/env bash
# Security: .control lines cannot reach outside the dataset; symlinks in the
# dataset are shown as links and the daemon never follows one, even one put
# in place of a file after the snapshot; a mount by an unprivileged user is
# that user's alone; the cache directory is private.  (importance.sh has
# .control under allow_other and control_uid=; basic.sh readlink of links.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_lib.sh"

mkdir -p "$SRC/train/c" "$SRC/train/d" "$WORK/secret"
for i in $(seq 0 9); do head -c 8192 /dev/urandom >"$SRC/train/c/f$i"; done
for i in 0 1; do head -c 8192 /dev/urandom >"$SRC/train/d/g$i"; done
echo "root:secret" >"$WORK/secret/passwd"
cp "$SRC/train/d/g0" "$SRC/train/d/g1" "$WORK/secret/"
ln -s "$WORK/secret/passwd" "$SRC/outside"        # absolute, outside the dataset
ln -s "$WORK/secret" "$SRC/dirlink"               # a directory outside
ln -s train/c/f1 "$SRC/inner"                    # inside the dataset

test_dataset_files_cannot_take_the_mounts_own_names() {
	echo 'not the stats' >"$SRC/.stats"
	echo 'not the control' >"$SRC/.control"
	ALLOWED_LOG="the dataset's own \.(stats|control) at its root is hidden"
	start_daemon
	ls -la "$MNT" >/dev/null           # readdirplus hands the kernel every entry
	expect_eq ".stats entries in a listing" "$(ls -a "$MNT" | grep -c '^\.stats$' || true)" 0
	python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$MNT/.stats" ||
		fail ".stats is not the mount's after a listing"
	expect_eq ".control after a listing" "$(control $'1 train/c/f1\n')" ok
	expect_eq "scored samples" "$(stat_value scored_samples)" 1
	expect_eq "warnings naming the hidden files" "$(grep -c 'at its root is hidden' "$LOG")" 2
	stop_daemon
	ALLOWED_LOG='^$'
	rm -f "$SRC/.stats" "$SRC/.control"
}

test_control_lines_cannot_name_anything_outside_the_dataset() {
	ALLOWED_LOG='\.control: line 1: '
	start_daemon
	local line n=0
	for line in "1 /etc/passwd" "1 ../secret/passwd" "1 train/../../secret/passwd" \
		"prefetch ../../../etc/shadow" "forget train/c/../../../secret/passwd" \
		"1 $WORK/secret/passwd" "1 $MNT/../secret/passwd" "prefetch $MNT/../src/train/c/f1" \
		"prefetch outside" "1 outside" "prefetch dirlink/passwd" "1 dirlink/g0" \
		"forget dirlink" "prefetch train/c" "prefetch ./train/c/f1" \
		"1 $MNT/train/c/../c/f1"; do
		expect_eq "'$line'" "$(control "$line"$'\n')" EINVAL
		n=$((n + 1))
	done
	expect_eq "control errors" "$(stat_value control_errors)" "$n"
	expect_eq "scored samples" "$(stat_value scored_samples)" 0
	expect_eq "source opens" "$(stat_value remote_ops.open)" 0
	expect_eq "prefetches" "$(stat_value prefetches)" 0
	expect_eq "cache entries" "$(stat_value cache.entries)" 0
	# The same samples written as the dataset's paths are accepted.
	expect_eq "paths inside" "$(control "1 train/c/f1"$'\n'"2 /train/c/f2"$'\n'"3 $MNT/train/c/f3"$'\n')" ok
	expect_eq "scored samples" "$(stat_value scored_samples)" 3
	# A link inside the dataset to a file inside it names that file (f1).
	expect_eq "a link inside the dataset" "$(control "4 inner"$'\n')" ok
	expect_eq "scored samples after the link" "$(stat_value scored_samples)" 3
}

test_symlinks_are_links_and_the_daemon_never_follows_one() {
	ALLOWED_LOG='cannot read .* from the source: Too many levels of symbolic links'
	start_daemon
	expect_eq "readlink outside" "$(readlink "$MNT/outside")" "$WORK/secret/passwd"
	expect_eq "readlink dirlink" "$(readlink "$MNT/dirlink")" "$WORK/secret"
	[ -L "$MNT/outside" ] && [ -L "$MNT/dirlink" ] || fail "links are not shown as links"
	python3 - "$MNT/outside" <<'PY' || fail "O_NOFOLLOW open of a link"
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_RDONLY | os.O_NOFOLLOW)
    sys.exit("opened")
except OSError as e:
    assert e.errno == errno.ELOOP, e
PY
	# Reading through a link is the kernel's walk in the reader's own
	# namespace; the daemon opens nothing for it and never lists below it.
	expect_eq "through outside" "$(cat "$MNT/outside")" "root:secret"
	expect_eq "source opens for links" "$(stat_value remote_ops.open)" 0
	expect_eq "snapshot entries (links not descended)" "$(stat_value snapshot.entries)" \
		"$(find -P "$SRC" | wc -l)"
	expect_eq "through inner" "$(read_status inner)" ok
	# After the snapshot, a file becomes a link to a secret (absolute and
	# relative) and a directory a link to a directory holding the same
	# names: the daemon refuses to follow them (EIO), never serving the
	# secret's bytes, and caches nothing for them.
	mv "$SRC/train/c/f2" "$SRC/train/c/f3" "$WORK/"
	ln -s "$WORK/secret/passwd" "$SRC/train/c/f2"
	ln -s ../../../secret/passwd "$SRC/train/c/f3"
	mv "$SRC/train/d" "$WORK/d.saved"
	ln -s "$WORK/secret" "$SRC/train/d"
	local p
	for p in train/c/f2 train/c/f3 train/d/g0 train/d/g1; do
		expect_eq "reading $p" "$(read_status_within 10 "$p")" EIO
	done
	expect_eq "cache entries" "$(stat_value cache.entries)" 1
	expect_eq "remote errors" "$(stat_value remote_errors)" 4
	rm "$SRC/train/d" "$SRC/train/c/f2" "$SRC/train/c/f3"
	mv "$WORK/d.saved" "$SRC/train/d"
	mv "$WORK/f2" "$WORK/f3" "$SRC/train/c/"
}

# as USER CMD...: runs CMD as the user with that number, no other group.
as() {
	local user=$1
	shift
	setpriv --reuid="$user" --regid="$user" --clear-groups "$@"
}

test_a_mount_by_an_unprivileged_user_is_that_users_alone() {
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; return 0; }
	if ! as 65534 test -r /dev/fuse -a -w /dev/fuse; then
		echo "SKIP: /dev/fuse is not open to other users here (mode $(stat -c %a /dev/fuse); Debian makes it 0666)"
		return 0
	fi
	ALLOWED_LOG='^$'
	chmod o+x "$WORK"
	chmod -R o+rX "$SRC"
	chown 65534 "$MNT"
	install -d -o 65534 -g 65534 -m 0700 "$WORK/ucache"
	# Not through as(): $! must be the daemon itself.
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$WORK/ucache,log_level=warning" 2>>"$LOG" &
	DAEMON_PID=$!
	for _ in $(seq 100); do as 65534 test -e "$MNT/.stats" 2>/dev/null && break; sleep 0.1; done
	as 65534 test -e "$MNT/.stats" || fail "the user's mount did not come up"
	expect_eq "owner and mode of .control" "$(as 65534 stat -c '%u %a' "$MNT/.control")" "65534 600"
	as 65534 sh -c "echo '1 train/c/f1' >'$MNT/.control'" || fail "the owner cannot write .control"
	as 65534 cmp "$MNT/train/c/f4" "$SRC/train/c/f4" || fail "the owner cannot read"
	# Without allow_other nobody else reaches the mount, root included.
	local who
	for who in 0 65533; do
		if as "$who" cat "$MNT/train/c/f4" >/dev/null 2>&1; then fail "user $who read the mount"; fi
		if as "$who" sh -c "echo '2 train/c/f2' >'$MNT/.control'" 2>/dev/null; then
			fail "user $who wrote .control"
		fi
	done
	# The owner may not loosen .control either: its mode is the daemon's.
	if as 65534 chmod 666 "$MNT/.control" 2>/dev/null; then fail "chmod of .control succeeded"; fi
	expect_eq "mode of .control" "$(as 65534 stat -c '%a' "$MNT/.control")" 600
	expect_eq "scored samples" "$(as 65534 /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["scored_samples"])' "$MNT/.stats")" 1
	timeout 10 fusermount3 -u "$MNT" || fail "fusermount3 -u of the user's mount"
	expect_daemon_exit 10 0
	check_log
}

test_the_cache_dir_is_private() {
	ALLOWED_LOG='^$'
	# Made 0700 (and its files 0600) whatever the umask.
	CACHE=$WORK/new/deeper/cache
	local umask_before
	umask_before=$(umask)
	umask 000
	start_daemon
	umask "$umask_before"
	read_all_shuffled >/dev/null
	echo 'epoch 1' >"$MNT/.control"
	stop_daemon
	expect_eq "modes of the new directories" "$(stat -c %a "$WORK/new" "$WORK/new/deeper" "$CACHE" "$CACHE/data" "$CACHE/data/00" "$CACHE/tmp" | sort -u)" 700
	local loose
	loose=$(find "$CACHE" -perm /022 -printf '%p %m\n')
	[ -z "$loose" ] || fail "cache files others may write: $loose"
	loose=$(find "$CACHE" \( -name 'index.db*' -o -name lock -o -name scores.bin -o -path '*/data/*' -type f \) -perm /077 -printf '%p %m\n')
	[ -z "$loose" ] || fail "cache files others may read: $loose"
	# A cache_dir others may write, or another user's, is refused.
	local out
	chmod 0777 "$CACHE"
	out=$("$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE" 2>&1) && fail "mounted a cache_dir mode 0777"
	grep -q "writable by other users" <<<"$out" && grep -q "chmod go-w" <<<"$out" || fail "cause: $out"
	chmod 1777 "$CACHE"
	"$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE" 2>/dev/null && fail "mounted a sticky cache_dir mode 1777"
	chmod 0700 "$CACHE"
	chown 65534 "$CACHE"
	out=$("$DLCACHE" mount "$SRC" "$MNT" -f -o "cache_dir=$CACHE" 2>&1) && fail "mounted another user's cache_dir"
	grep -q "belongs to user 65534" <<<"$out" || fail "cause: $out"
	mountpoint -q "$MNT" && fail "mounted anyway"
	chown 0 "$CACHE"
	start_daemon
	expect_eq "files read from the private cache" "$(read_all_shuffled)" 12
	expect_eq "hits" "$(stat_value hits)" 12
}

run_tests
