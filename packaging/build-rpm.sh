#!/usr/bin/env bash
# build-rpm.sh [OUTDIR] - builds the RPMs of this tree (dlcache and its
# python3-dlcache subpackage) with rpmbuild -bb from
# packaging/rpm/dlcache.spec and a tarball of the tree's files; the .rpms
# land in OUTDIR (default: the current directory), python3-dlcache listed
# first.  Where meson ships no RPM macros (Debian), packaging/rpm/macros.meson
# supplies them (and python3_sitelib) and the BuildRequires are not checked
# (Debian's rpm has no package database).
. "$(dirname "$0")/common.sh"
mkdir -p "$work"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
copy_tree "$work/tree/dlcache-$version"
tar -C "$work/tree" -czf "$work/SOURCES/dlcache-$version.tar.gz" "dlcache-$version"
args=(--define "_topdir $work" --define "_tmppath $work")
# The libfuse tests/build.sh builds with (DLC_LIBFUSE: auto, private, system).
pcpath=$("$top/tests/build.sh" --libfuse)
[ -z "$pcpath" ] || args+=(--define "dlc_pkg_config_path $pcpath")
if ! rpm --eval '%{?meson_build}' | grep -q meson; then
	args+=(--nodeps --load "$top/packaging/rpm/macros.meson")
fi
rpmbuild -bb "${args[@]}" "$top/packaging/rpm/dlcache.spec" >"$work/build.log" 2>&1 || {
	tail -n 30 "$work/build.log" >&2
	echo "build-rpm: rpmbuild failed (the end of its log is above); install the BuildRequires of packaging/rpm/dlcache.spec." >&2
	exit 1
}
find "$work/RPMS" \( -name 'dlcache-*.rpm' -o -name 'python3-dlcache-*.rpm' \) -exec mv -t "$out" {} +
# The daemon's package last: tests/package/packages.sh takes the last line.
ls "$out"/python3-dlcache-"$version"*.rpm
ls "$out"/dlcache-"$version"*.rpm
