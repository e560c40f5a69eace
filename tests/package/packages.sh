#!/usr/bin/env bash
# The packages build and hold what they must: packaging/build-deb.sh
# (dpkg-buildpackage -us -uc -b) and packaging/build-rpm.sh (rpmbuild -bb),
# then their file lists and dependencies are checked.  As root, the two
# .debs are then installed with apt-get, Debian's /usr/bin/python3 must
# import dlcache from /usr/lib/python3/dist-packages, and they are purged
# again (on failure too); a machine where dlcache is installed already is
# left alone.
set -euo pipefail
: "${SRCDIR:?SRCDIR must name the source tree}"
WORK=$(mktemp -d /tmp/dlcache-package.XXXXXX)
INSTALLED=
cleanup() {
	[ -z "$INSTALLED" ] ||
		apt-get purge -y -qq -o DPkg::Lock::Timeout=300 python3-dlcache dlcache >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 143" INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

EXPECTED=(usr/bin/dlcache sbin/mount.dlcache sbin/mount.fuse.dlcache
	usr/share/man/man1/dlcache.1 usr/share/man/man5/dlcache-control.5
	usr/share/man/man8/mount.dlcache.8)

# The Python package's modules, under the site directory of each format.
PY_MODULES=(__init__.py mount.py scores.py samplers.py distributed.py loaders.py py.typed)

# has_all LISTING [PATH...]: every path given (default: EXPECTED) appears in
# LISTING (with or without a compression suffix on the man pages).
has_all() {
	local p listing=$1
	shift
	[ $# -gt 0 ] || set -- "${EXPECTED[@]}"
	for p in "$@"; do
		grep -Eq "(^|[ /.])$p(\.gz)?( ->|$)" "$listing" || fail "the package lacks /$p; it holds: $(cat "$listing")"
	done
}

# install_debs DEB PYDEB: apt-get installs both, Debian's python3 imports
# dlcache from the system's site directory (not from this tree), and both
# are purged again.
install_debs() {
	local p where
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
		echo "not root, or no apt-get: the .debs are built but not installed here"
		return 0
	fi
	for p in dlcache python3-dlcache; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
			echo "$p is installed on this machine already: the suite does not replace it, nor install the .debs"
			return 0
		fi
	done
	INSTALLED=1
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$1" "$2" \
		>"$WORK/apt.log" 2>&1 || fail "apt-get install of the .debs failed: $(tail -n 5 "$WORK/apt.log")"
	where=$(cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import dlcache; print(dlcache.__file__)') ||
		fail "Debian's python3 cannot import dlcache after apt-get install python3-dlcache"
	[ "$where" = /usr/lib/python3/dist-packages/dlcache/__init__.py ] ||
		fail "Debian's python3 imports dlcache from $where, not from python3-dlcache"
	(cd / && env -u PYTHONPATH /usr/bin/python3 -c '
import dlcache
s = dlcache.ShuffleSampler(["a", "b", "c"], seed=1)
assert sorted(s) == [0, 1, 2]
assert dlcache.find_mount("/") is None') || fail "the installed dlcache package does not work"
	/usr/bin/dlcache --version >/dev/null || fail "the installed /usr/bin/dlcache does not run"
	echo "installed: /usr/bin/python3 imports dlcache from $where"
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq -o DPkg::Lock::Timeout=300 python3-dlcache dlcache \
		>"$WORK/apt.log" 2>&1 || fail "apt-get purge of the .debs failed: $(tail -n 5 "$WORK/apt.log")"
	INSTALLED=
	! (cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import dlcache' 2>/dev/null) ||
		fail "dlcache is still importable after apt-get purge python3-dlcache"
	[ ! -e /usr/lib/python3/dist-packages/dlcache ] ||
		fail "apt-get purge python3-dlcache left /usr/lib/python3/dist-packages/dlcache behind"
	echo "purged: python3-dlcache and dlcache"
}

echo "== .deb"
command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null ||
	{ echo "SKIP: dpkg-buildpackage or debhelper is missing"; exit 77; }
"$SRCDIR/packaging/build-deb.sh" "$WORK/deb" >"$WORK/debs"
deb=$(tail -n 1 "$WORK/debs")
pydeb=$(grep '/python3-dlcache_[^/]*_all\.deb$' "$WORK/debs") ||
	fail "build-deb.sh built no python3-dlcache_*_all.deb: $(cat "$WORK/debs")"
dpkg-deb -c "$deb" | awk '{$1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print}' | tee "$WORK/deb.list"
has_all "$WORK/deb.list"
! grep -q 'dist-packages' "$WORK/deb.list" || fail "the daemon's .deb holds Python modules; they belong in python3-dlcache"
echo "== python3-dlcache .deb"
dpkg-deb -c "$pydeb" | awk '{$1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print}' | tee "$WORK/pydeb.list"
has_all "$WORK/pydeb.list" "${PY_MODULES[@]/#/usr/lib/python3/dist-packages/dlcache/}"
dpkg-deb -f "$pydeb" Depends | tee "$WORK/pydeb.depends"
grep -q 'python3' "$WORK/pydeb.depends" || fail "python3-dlcache does not depend on python3"
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

install_debs "$deb" "$pydeb"

echo "== .rpm"
if command -v rpmbuild >/dev/null; then
	"$SRCDIR/packaging/build-rpm.sh" "$WORK/rpm" >"$WORK/rpms"
	rpm=$(tail -n 1 "$WORK/rpms")
	pyrpm=$(grep '/python3-dlcache-[^/]*\.noarch\.rpm$' "$WORK/rpms") ||
		fail "build-rpm.sh built no python3-dlcache-*.noarch.rpm: $(cat "$WORK/rpms")"
	rpm -qlp "$rpm" 2>/dev/null | tee "$WORK/rpm.list"
	has_all "$WORK/rpm.list"
	rpm -qlp "$pyrpm" 2>/dev/null | tee "$WORK/pyrpm.list"
	sitelib=$(grep -o '^/usr/lib/python3[^/]*/site-packages/dlcache/' "$WORK/pyrpm.list" | head -n 1) ||
		fail "python3-dlcache's rpm holds no site-packages/dlcache/: $(cat "$WORK/pyrpm.list")"
	has_all "$WORK/pyrpm.list" "${PY_MODULES[@]/#/${sitelib#/}}"
else
	echo "rpmbuild is missing: the RPM is not built here"
fi
echo "ok packages"
