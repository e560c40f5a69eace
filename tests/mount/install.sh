#!/usr/bin/env bash
# Installation and the mount(8) paths: `meson install` lays out the binary,
# /sbin/mount.dlcache, /sbin/mount.fuse.dlcache and the manual pages; then
# `mount -t dlcache`, `mount -t fuse.dlcache`, an /etc/fstab line (through
# mount --fstab) and `umount` work, and the systemd examples verify.
. "$(dirname "$0")/lib.sh"

BUILDDIR=$(dirname "$DLCACHE")
ROOT=$WORK/root
make_dataset "$SRC" 2 10 3000

# mount(8) finds helpers only in /sbin: point /sbin/mount.dlcache and
# /sbin/mount.fuse.dlcache at the binary under test for the test's life,
# and put back whatever was there before.
HELPERS=(/sbin/mount.dlcache /sbin/mount.fuse.dlcache)
restore_helpers() {
	local h
	[ -n "$HELPERS_INSTALLED" ] || return 0
	for h in "${HELPERS[@]}"; do
		rm -f "$h"
		[ -e "$WORK/saved.${h##*/}" ] || [ -L "$WORK/saved.${h##*/}" ] &&
			mv "$WORK/saved.${h##*/}" "$h"
	done
	return 0
}
HELPERS_INSTALLED=
install_helpers() {
	local h
	[ -z "$HELPERS_INSTALLED" ] || return 0
	HELPERS_INSTALLED=1
	for h in "${HELPERS[@]}"; do
		if [ -e "$h" ] || [ -L "$h" ]; then mv "$h" "$WORK/saved.${h##*/}"; fi
		ln -s "$DLCACHE" "$h"
	done
}
CLEANUP_HOOKS+=(restore_helpers)

same_tree() {
	diff -r "$SRC" "$MNT" >/dev/null || fail "the mount's files differ from the source"
}

# unmount_and_wait: umount(8), then wait for the background daemon to let go
# of the cache (its lock), so the next mount of the same cache_dir succeeds.
unmount_and_wait() {
	umount "$MNT" || fail "umount $MNT failed"
	mountpoint -q "$MNT" && fail "$MNT is still mounted after umount"
	for _ in $(seq 1 100); do
		flock -n "$CACHE/lock" true 2>/dev/null && return 0
		sleep 0.1
	done
	fail "the daemon still holds $CACHE/lock 10 s after umount"
}

test_meson_install_lays_out_binary_helpers_and_man_pages() {
	DESTDIR=$ROOT meson install -C "$BUILDDIR" --no-rebuild --quiet >"$WORK/install.log" 2>&1 ||
		fail "meson install failed: $(tail -5 "$WORK/install.log")"
	local prefix f
	prefix=$(meson introspect "$BUILDDIR" --buildoptions |
		/usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
	[ -x "$ROOT$prefix/bin/dlcache" ] || fail "no $prefix/bin/dlcache"
	for f in "${HELPERS[@]}"; do
		[ -L "$ROOT$f" ] || fail "no symlink $f"
		expect_eq "$f points to" "$(readlink "$ROOT$f")" "$prefix/bin/dlcache"
	done
	for f in man1/dlcache.1 man5/dlcache-control.5 man8/mount.dlcache.8; do
		[ -f "$ROOT$prefix/share/man/$f" ] || fail "no man page $f"
	done
}

test_mount_t_dlcache_and_umount() {
	install_helpers
	mount -t dlcache "$SRC" "$MNT" -o "cache_dir=$CACHE,cache_size=64M" ||
		fail "mount -t dlcache failed"
	[ "$(stat -f -c %T "$MNT")" = fuseblk ] || [ -e "$MNT/.stats" ] || fail "not a dlcache mount"
	same_tree
	expect_eq "source in .stats" "$(stat_value source)" "$SRC"
	unmount_and_wait
	# The cache filled by that mount is reused by the next one.
	mount -t fuse.dlcache "$SRC" "$MNT" -o "cache_dir=$CACHE,cache_size=64M" ||
		fail "mount -t fuse.dlcache failed"
	same_tree
	[ "$(stat_value misses)" = 0 ] || fail "the remount missed $(stat_value misses) times"
	unmount_and_wait
}

test_an_fstab_line_mounts_with_fstab_only_options() {
	install_helpers
	printf '%s %s dlcache cache_dir=%s,cache_size=64M,_netdev,nofail,noatime,x-systemd.automount 0 0\n' \
		"$SRC" "$MNT" "$CACHE" >"$WORK/fstab"
	mount --fstab "$WORK/fstab" "$MNT" || fail "mount --fstab (an fstab line) failed"
	same_tree
	grep -q " $MNT fuse.dlcache " /proc/mounts || fail "/proc/mounts does not show fuse.dlcache"
	unmount_and_wait
}

test_a_bad_option_through_mount_t_is_one_sentence() {
	install_helpers
	if mount -t dlcache "$SRC" "$MNT" -o "cache_dir=$CACHE,cache_size=lots" 2>"$WORK/err"; then
		fail "a bad cache_size was accepted"
	fi
	mountpoint -q "$MNT" && fail "mounted despite the bad option"
	[ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "not one line: $(cat "$WORK/err")"
	grep -q "cache_size" "$WORK/err" || fail "the error does not name cache_size: $(cat "$WORK/err")"
}

test_systemd_examples_verify() {
	command -v systemd-analyze >/dev/null || { echo "  (systemd-analyze missing: skipped)"; return 0; }
	local unit dir=$WORK/units out
	mkdir -p "$dir"
	for unit in "$SRCDIR"/packaging/systemd/*; do
		cp "$unit" "$dir/"
	done
	mv "$dir/dlcache@.service" "$dir/dlcache@imagenet.service"
	out=$(systemd-analyze verify "$dir"/* 2>&1 |
		grep -Ev "Command /usr/bin/dlcache is not executable|Command 'man .*' failed" || true)
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
}

run_tests
