#!/usr/bin/env bash
# tests/run.sh - sets up and passes every test suite on a fresh Debian 12:
# installs what is missing (apt-get, idempotent), builds build/ with
# tests/build.sh, runs the unit suites (check) and the mount suites (real FUSE mounts).
# Mount tests need root and /dev/fuse.  With CI set, warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
dlc_install_packages "${DLC_BUILD_PACKAGES[@]}" "${DLC_RUN_PACKAGES[@]}" \
	"${DLC_TRAIN_PACKAGES[@]}" "${DLC_PACKAGE_PACKAGES[@]}" "${DLC_TEST_PACKAGES[@]}"

# The fuzz suite's compiler (tests/fuzz/run.sh skips without it).
dlc_install_packages "${DLC_FUZZ_PACKAGES[@]}"
# The main build (build/): the private static libfuse 3.18, so the mount
# suites run with passthrough; the sanitize suite builds build-asan/ against
# the system's libfuse 3.14 (tests/sanitize.sh), so the same suites also
# pass on the fallback.  CI set: warnings are errors.
tests/build.sh
# --verbose keeps check's summary lines ("100%: Checks: N, Failures: 0, Errors: 0") in the output.
meson test -C build --verbose --print-errorlogs "$@"
