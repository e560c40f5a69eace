#!/usr/bin/env bash
# build-deb.sh [OUTDIR] - builds the Debian package of this tree with
# dpkg-buildpackage -us -uc -b, from a copy of the tree's files (tracked and
# untracked, not ignored) with packaging/debian as debian/; the .deb lands in
# OUTDIR (default: the current directory).  Needs debhelper and the build
# dependencies of packaging/debian/control (tests/run.sh installs them).
. "$(dirname "$0")/common.sh"
# The libfuse tests/build.sh builds with (DLC_LIBFUSE: auto, private, system).
export DLC_PKG_CONFIG_PATH
DLC_PKG_CONFIG_PATH=$("$top/tests/build.sh" --libfuse)
tree=$work/dlcache-$version
copy_tree "$tree"
cp -r "$top/packaging/debian" "$tree/debian"
(cd "$tree" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
	tail -n 30 "$work/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (the end of its log is above); install the build dependencies of packaging/debian/control." >&2
	exit 1
}
mv "$work"/dlcache_*.deb "$out/"
ls "$out"/dlcache_"$version"*.deb
