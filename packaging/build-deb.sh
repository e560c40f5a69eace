#!/usr/bin/env bash
# build-deb.sh [OUTDIR] - builds the Debian packages of this tree (dlcache,
# and python3-dlcache with the Python package) with dpkg-buildpackage -us
# -uc -b, from a copy of the tree's files (tracked and untracked, not
# ignored) with packaging/debian as debian/; the .debs land in OUTDIR
# (default: the current directory) and are listed, python3-dlcache first.
# Needs debhelper, dh-python and the build dependencies of
# packaging/debian/control (tests/run.sh installs them).
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
mv "$work"/dlcache_*.deb "$work"/python3-dlcache_*.deb "$out/"
# The daemon's package last: tests/package/packages.sh takes the last line.
ls "$out"/python3-dlcache_"$version"*.deb
ls "$out"/dlcache_"$version"*.deb
