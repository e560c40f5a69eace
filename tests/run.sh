#!/usr/bin/env bash
# tests/run.sh - sets up and passes every test suite on a fresh Debian 12:
# installs what is missing (apt-get, idempotent), builds with meson into
# build/, runs the unit suites (check) and the mount suites (real FUSE mounts).
# Mount tests need root and /dev/fuse.  With CI set, warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" "${DLC_RUN_PACKAGES[@]}" \
	"${DLC_TRAIN_PACKAGES[@]}" "${DLC_PACKAGE_PACKAGES[@]}" "${DLC_TEST_PACKAGES[@]}"

# The fuzz suite's compiler (tests/fuzz/run.sh skips without it).
dlc_install_packages "${DLC_FUZZ_PACKAGES[@]}"
werror=false
[ -n "${CI:-}" ] && werror=true
if [ -d build/meson-private ]; then
	meson setup --reconfigure build -Dwerror=$werror >/dev/null
else
	meson setup build -Dwerror=$werror >/dev/null
fi
ninja -C build
# --verbose keeps check's summary lines ("100%: Checks: N, Failures: 0, Errors: 0") in the output.
meson test -C build --verbose --print-errorlogs "$@"
