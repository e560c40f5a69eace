#!/usr/bin/env bash
# The packages build and hold what they must: packaging/build-deb.sh
# (dpkg-buildpackage -us -uc -b) and packaging/build-rpm.sh (rpmbuild -bb),
# then their file lists and dependencies are checked.
set -euo pipefail
: "${SRCDIR:?SRCDIR must name the source tree}"
WORK=$(mktemp -d /tmp/dlcache-package.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap "exit 143" INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

EXPECTED=(usr/bin/dlcache sbin/mount.dlcache sbin/mount.fuse.dlcache
	usr/share/man/man1/dlcache.1 usr/share/man/man5/dlcache-control.5
	usr/share/man/man8/mount.dlcache.8)

# has_all LISTING: every expected path appears in LISTING (with or without
# a compression suffix on the man pages).
has_all() {
	local p
	for p in "${EXPECTED[@]}"; do
		grep -Eq "(^|[ /.])$p(\.gz)?( ->|$)" "$1" || fail "the package lacks /$p; it holds: $(cat "$1")"
	done
}

echo "== .deb"
command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null ||
	{ echo "SKIP: dpkg-buildpackage or debhelper is missing"; exit 77; }
deb=$("$SRCDIR/packaging/build-deb.sh" "$WORK/deb" | tail -n 1)
dpkg-deb -c "$deb" | awk '{$1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print}' | tee "$WORK/deb.list"
has_all "$WORK/deb.list"
dpkg-deb -f "$deb" Depends | tee "$WORK/deb.depends"
for d in fuse3 libsqlite3 libxxhash libnfs libarchive libmemcached; do
	grep -q "$d" "$WORK/deb.depends" || fail "the .deb does not depend on $d"
done
# Built against tests/build.sh's private static libfuse, the daemon needs
# fusermount3 (fuse3) but not the system's libfuse3-3; against the system's
# libfuse it needs libfuse3-3.
if [ -n "$(DLC_LIBFUSE=${DLC_LIBFUSE:-auto} "$SRCDIR/tests/build.sh" --libfuse)" ]; then
	! grep -q libfuse3 "$WORK/deb.depends" || fail "the .deb depends on libfuse3 although it links the private static libfuse"
else
	grep -q libfuse3 "$WORK/deb.depends" || fail "the .deb does not depend on libfuse3"
fi

echo "== .rpm"
if command -v rpmbuild >/dev/null; then
	rpm=$("$SRCDIR/packaging/build-rpm.sh" "$WORK/rpm" | tail -n 1)
	rpm -qlp "$rpm" 2>/dev/null | tee "$WORK/rpm.list"
	has_all "$WORK/rpm.list"
else
	echo "rpmbuild is missing: the RPM is not built here"
fi
echo "ok packages"
