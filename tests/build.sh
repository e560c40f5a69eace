#!/usr/bin/env bash
# tests/build.sh - the one build command: installs what the build needs and
# builds dlcache with meson into build/ (or $BUILD).
#
#     tests/build.sh [MESON_OPTION...]      # e.g. tests/build.sh -Dbuildtype=release
#     tests/build.sh --libfuse              # only the libfuse: prints the
#                                           # pkg-config directory to build
#                                           # against (empty: the system's)
#
# The packaging scripts use --libfuse and hand the directory to meson's
# pkg_config_path option inside the package build.
#
# FUSE passthrough (cache hits read by the kernel from the cache file, the
# daemon out of the READ path) needs libfuse >= 3.17, FUSE over io_uring
# (io_uring=1) libfuse >= 3.18; Debian 12 ships 3.14.  Where the system's
# libfuse is older than 3.17, this script fetches a Debian fuse3 *source*
# package through a private apt configuration kept beside the build (its
# own sources.list with deb-src lines, its own state and cache directories:
# the system's apt sources are not touched; newer suites' binary packages
# would need a newer glibc), builds it with meson as a static library (no
# utilities, examples or tests; io_uring support with liburing and libnuma)
# into a private prefix, and configures dlcache against that prefix.  The
# source comes from the most stable suite that carries fuse3 >= 3.18
# (DLC_LIBFUSE_SUITES, in order), else from trixie (3.17: passthrough, no
# io_uring).  The fetched source, the libfuse build and the prefix are kept,
# so a rerun neither fetches nor rebuilds; a prefix older than 3.18 built
# before the suites were searched is replaced once.  The binary then needs
# fuse3 (fusermount3, for non-root mounts) but not libfuse3-3.
#
# Environment:
#     BUILD            the build directory (default: build in the source tree)
#     DLC_LIBFUSE      auto (default): the private libfuse where the system's
#                      is older than 3.17; private: always; system: the
#                      system's libfuse (3.14 on Debian 12: no passthrough)
#     DLC_LIBFUSE_DIR  where the private libfuse lives: apt/ (the private apt
#                      configuration), src/ (the source package), build/,
#                      prefix/ (default: build-libfuse in the source tree, a
#                      sibling of build/ that survives its removal)
#     DLC_LIBFUSE_SUITES  the Debian suites asked for fuse3 >= 3.18, most
#                      stable first (default: trixie-backports forky sid);
#                      trixie's 3.17 when none has it
#     CI               set: warnings are errors (-Dwerror=true)
#
# The last line printed names the build directory and the libfuse it uses.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
DLC_LIBFUSE=${DLC_LIBFUSE:-auto}
DLC_LIBFUSE_DIR=${DLC_LIBFUSE_DIR:-$top/build-libfuse}
LIBFUSE_WANTED=3.17
LIBFUSE_URING=3.18
DLC_LIBFUSE_SUITES=${DLC_LIBFUSE_SUITES:-trixie-backports forky sid}
. "$top/tests/deps.sh"

case $DLC_LIBFUSE in
auto | private | system) ;;
*)
	echo "tests/build.sh: DLC_LIBFUSE=$DLC_LIBFUSE is not one of auto, private, system; unset it or pick one." >&2
	exit 2
	;;
esac

dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" >&2

# version_at_least A B: A >= B, for dotted versions.
version_at_least() {
	[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

# pc_version FILE: the Version of a pkg-config file, or nothing.
pc_version() {
	sed -n 's/^Version: *//p' "$1" 2>/dev/null | head -n 1
}

# The patches dlcache applies to the libfuse it builds (packaging/libfuse/,
# in name order; each says what it fixes), and their stamp: a prefix built
# with other patches (prefix/.patches) is rebuilt.
shopt -s nullglob
LIBFUSE_PATCHES=("$top"/packaging/libfuse/*.patch)
shopt -u nullglob
patches_stamp() {
	if [ ${#LIBFUSE_PATCHES[@]} -eq 0 ]; then echo none; return; fi
	cat "${LIBFUSE_PATCHES[@]}" | sha256sum | cut -c 1-16
}

# prefix_current: the private prefix is complete and built with today's patches.
prefix_current() {
	[ -f "$DLC_LIBFUSE_DIR/prefix/.complete" ] && [ -f "$DLC_LIBFUSE_DIR/prefix/lib/pkgconfig/fuse3.pc" ] &&
		[ "$(cat "$DLC_LIBFUSE_DIR/prefix/.patches" 2>/dev/null)" = "$(patches_stamp)" ]
}

# apply_libfuse_patches SRCDIR VERSION: applies each patch to the unpacked
# source.  One that does not apply (a newer libfuse changed that code, and
# may carry the fix itself) is reported and left out; the build goes on.
apply_libfuse_patches() {
	local p
	for p in "${LIBFUSE_PATCHES[@]}"; do
		if patch -d "$1" -p1 --forward --dry-run -s <"$p" >/dev/null 2>&1; then
			patch -d "$1" -p1 --forward -s <"$p"
			echo "Applied ${p#"$top"/} to libfuse $2."
		else
			echo "tests/build.sh: ${p#"$top"/} does not apply to libfuse $2 and is left out; check that this libfuse fixes what the patch's header names, or use an older fuse3 source (remove $DLC_LIBFUSE_DIR/src)." >&2
		fi
	done
}

# private_libfuse: makes $DLC_LIBFUSE_DIR/prefix hold a static libfuse
# (fuse3.pc in prefix/lib/pkgconfig): >= 3.18 from the first of
# $DLC_LIBFUSE_SUITES that carries one, else trixie's 3.17.  A complete
# prefix is kept if it is >= 3.18 or was built after such a search
# (prefix/.searched, once every suite answered); a 3.17 prefix from
# before is replaced once.
private_libfuse() {
	local d=$DLC_LIBFUSE_DIR apt=$DLC_LIBFUSE_DIR/apt
	local pc=$d/prefix/lib/pkgconfig/fuse3.pc have
	if prefix_current; then
		have=$(pc_version "$pc")
		if version_at_least "${have:-0}" "$LIBFUSE_URING" || [ -f "$d/prefix/.searched" ]; then
			return 0
		fi
		echo "The private libfuse in $d/prefix is ${have:-of unknown version}; looking for a Debian fuse3 >= $LIBFUSE_URING (FUSE over io_uring)..."
	fi
	# dpkg-source unpacks the source package and applies Debian's patches.
	dlc_install_packages dpkg-dev
	mkdir -p "$apt/etc/sources.list.d" "$apt/etc/preferences.d" "$apt/etc/apt.conf.d" \
		"$apt/state/lists/partial" "$apt/cache/archives/partial" "$d/src"
	{
		echo "# Private to dlcache's build (tests/build.sh): fuse3's sources only."
		local suite
		for suite in $DLC_LIBFUSE_SUITES trixie; do
			echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
		done
	} >"$apt/etc/sources.list"
	: >"$apt/state/status"
	local aptopts=(-o "Dir::Etc=$apt/etc" -o "Dir::Etc::sourcelist=$apt/etc/sources.list"
		-o "Dir::Etc::sourceparts=$apt/etc/sources.list.d" -o "Dir::Etc::parts=$apt/etc/apt.conf.d"
		-o "Dir::Etc::preferencesparts=$apt/etc/preferences.d"
		-o "Dir::State=$apt/state" -o "Dir::State::status=$apt/state/status"
		-o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
	local dsc= chosen= chosen_version= answered=true v
	echo "Looking for Debian's fuse3 source package in $DLC_LIBFUSE_SUITES, then trixie (private apt configuration in $apt)..."
	# A suite that does not answer (renamed, unreachable) fails the update
	# but not the others' indexes: ask what there is, complain if nothing.
	# Only a search every suite answered is final (prefix/.searched): after
	# a partial one, the next run asks again.
	apt-get "${aptopts[@]}" -qq update >"$d/apt.log" 2>&1 || answered=false
	for suite in $DLC_LIBFUSE_SUITES trixie; do
		# --print-uris names the .dsc (hence the version) without fetching.
		v=$(apt-get "${aptopts[@]}" -qq source --print-uris "fuse3/$suite" 2>/dev/null |
			grep -o "fuse3_[^ ']*\.dsc" | head -n 1 | sed 's/^fuse3_//; s/\.dsc$//') || v=
		[ -n "$v" ] || continue
		if [ "$suite" = trixie ] || version_at_least "${v%%-*}" "$LIBFUSE_URING"; then
			chosen=$suite chosen_version=$v
			break
		fi
	done
	if [ -z "$chosen" ]; then
		tail -n 5 "$d/apt.log" >&2
		echo "tests/build.sh: no suite answered for fuse3 (apt-get update above); using what $d already holds." >&2
	else
		echo "Debian $chosen has fuse3 $chosen_version."
	fi
	if [ -n "$chosen" ]; then
		if prefix_current && [ "$(pc_version "$pc")" = "${chosen_version%%-*}" ]; then
			# The newest there is, already built.
			! $answered || touch "$d/prefix/.searched"
			return 0
		fi
		dsc=$d/src/fuse3_$chosen_version.dsc
		if [ ! -f "$dsc" ]; then
			echo "Fetching fuse3 $chosen_version from Debian $chosen..."
			(cd "$d/src" && apt-get "${aptopts[@]}" -qq source --download-only "fuse3/$chosen") ||
				{ echo "tests/build.sh: apt-get source fuse3/$chosen failed; check that deb.debian.org is reachable, or build with DLC_LIBFUSE=system." >&2; return 1; }
		fi
	else
		# Offline: the prefix there, else the newest source package fetched before.
		prefix_current && return 0
		dsc=$(find "$d/src" -maxdepth 1 -name 'fuse3_*.dsc' | sort -V | tail -n 1)
		[ -n "$dsc" ] ||
			{ echo "tests/build.sh: no fuse3 source package could be fetched; check that deb.debian.org is reachable, or build with DLC_LIBFUSE=system." >&2; return 1; }
	fi
	local srcdir=$d/src/unpacked
	rm -rf "$srcdir"
	# apt checked the files against the suite's signed Sources index;
	# dpkg-source cannot check the uploader's own signature (no Debian
	# developer keyring).
	dpkg-source -x "$dsc" "$srcdir" >"$d/unpack.log" 2>&1 ||
		{ tail -n 20 "$d/unpack.log" >&2; echo "tests/build.sh: unpacking $dsc failed (log above); remove $d/src and run again." >&2; return 1; }
	local version
	version=$(grep -o "version *: *'[0-9.]*'" "$srcdir/meson.build" | head -n 1 | grep -o "[0-9][0-9.]*")
	version_at_least "${version:-0}" "$LIBFUSE_WANTED" ||
		{ echo "tests/build.sh: the fetched fuse3 source is ${version:-of unknown version}, older than $LIBFUSE_WANTED; build with DLC_LIBFUSE=system." >&2; return 1; }
	apply_libfuse_patches "$srcdir" "$version"
	echo "Building libfuse $version as a static library into $d/prefix..."
	rm -rf "$d/build" "$d/prefix"
	# libdir=lib: one pkg-config path whatever the multiarch triplet; utils
	# off: fusermount3 and mount.fuse3 come from the system's fuse3 package.
	# io_uring (3.18): built when liburing and libnuma are there (deps.sh).
	local uring_opt=()
	grep -q "enable-io-uring" "$srcdir/meson_options.txt" 2>/dev/null && uring_opt=(-Denable-io-uring=true)
	meson setup "$d/build" "$srcdir" --prefix="$d/prefix" --libdir=lib \
		--buildtype=release -Ddefault_library=static -Db_staticpic=true \
		-Dutils=false -Dexamples=false -Dtests=false -Dinitscriptdir= "${uring_opt[@]}" \
		>"$d/setup.log" 2>&1 || { tail -n 20 "$d/setup.log" >&2; echo "tests/build.sh: configuring libfuse failed (log above, in $d/setup.log)." >&2; return 1; }
	ninja -C "$d/build" install >"$d/build.log" 2>&1 ||
		{ tail -n 20 "$d/build.log" >&2; echo "tests/build.sh: building libfuse failed (log above, in $d/build.log)." >&2; return 1; }
	[ -f "$pc" ] || { echo "tests/build.sh: the libfuse build installed no $pc; remove $d and run again." >&2; return 1; }
	if [ -n "$chosen" ] && $answered; then touch "$d/prefix/.searched"; fi
	patches_stamp >"$d/prefix/.patches"
	touch "$d/prefix/.complete"
}

# libfuse_uring BUILD_DIR: yes when the private libfuse was built with io_uring.
libfuse_uring() {
	if grep -q "^#define HAVE_URING" "$1/fuse_config.h" 2>/dev/null; then echo yes; else echo no; fi
}

system_version=$(pkg-config --modversion fuse3 2>/dev/null || echo 0)
use_private=false
case $DLC_LIBFUSE in
private) use_private=true ;;
auto) version_at_least "$system_version" "$LIBFUSE_WANTED" || use_private=true ;;
esac
pcpath=
if $use_private; then
	if [ "${1:-}" = --libfuse ]; then
		private_libfuse >&2
	else
		private_libfuse
	fi
	pcpath=$DLC_LIBFUSE_DIR/prefix/lib/pkgconfig
fi
if [ "${1:-}" = --libfuse ]; then
	echo "$pcpath"
	exit 0
fi

werror=false
[ -n "${CI:-}" ] && werror=true
# pkg_config_path is a meson option, stored in the build directory: a
# later `ninja -C build` or reconfigure keeps the same libfuse.
opts=(-Dwerror=$werror "-Dpkg_config_path=$pcpath" "$@")
if [ -d "$BUILD/meson-private" ]; then
	# Meson caches what it found (fuse3 3.17 before the private libfuse
	# became 3.18, without 3.18's liburing and libnuma): look again.
	meson configure --clearcache "$BUILD" >/dev/null
	meson setup --reconfigure "$BUILD" "$top" "${opts[@]}" >"$BUILD.setup.log" 2>&1 ||
		{ tail -n 20 "$BUILD.setup.log" >&2; echo "tests/build.sh: configuring $BUILD failed (log above, in $BUILD.setup.log); remove $BUILD and run tests/build.sh again." >&2; exit 1; }
else
	meson setup "$BUILD" "$top" "${opts[@]}" >"$BUILD.setup.log" 2>&1 ||
		{ tail -n 20 "$BUILD.setup.log" >&2; echo "tests/build.sh: configuring $BUILD failed (log above, in $BUILD.setup.log)." >&2; exit 1; }
fi
ninja -C "$BUILD" >"$BUILD.ninja.log" 2>&1 ||
	{ grep -E "error|undefined" "$BUILD.ninja.log" | tail -n 20 >&2; echo "tests/build.sh: building $BUILD failed (errors above, all of it in $BUILD.ninja.log)." >&2; exit 1; }
fuse_version=$(meson introspect --dependencies "$BUILD" 2>/dev/null |
	python3 -c 'import json,sys; print(([d["version"] for d in json.load(sys.stdin) if d["name"] == "fuse3"] or ["?"])[-1])' 2>/dev/null || echo '?')
if $use_private; then
	echo "built $BUILD against the private static libfuse $fuse_version ($DLC_LIBFUSE_DIR/prefix; io_uring: $(libfuse_uring "$DLC_LIBFUSE_DIR/build"))"
else
	echo "built $BUILD against the system's libfuse $fuse_version"
fi
