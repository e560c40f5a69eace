#!/usr/bin/env bash
# tests/sanitize.sh - the unit and mount suites again, with the library, the
# daemon and the tests built with AddressSanitizer (LeakSanitizer included)
# and UndefinedBehaviorSanitizer, in their own build directory.
#
#     tests/sanitize.sh [SUITE...]          # default: unit mount
#
# The mount tests of the suite 'torch' (train, train_hits) are left out
# unless named: PyTorch's DataLoader spends their time, not the daemon, and
# the main build (tests/run.sh) runs them.
#
# Environment:
#     ASAN_BUILD      build directory (default: build-asan in the source tree)
#     STRESS_SECONDS  length of the mount stress test here (default: 15)
#     SRCDIR          the source tree (default: this script's ..)
#     SANITIZE_LIBFUSE  system (default), private or auto: tests/build.sh's
#                     DLC_LIBFUSE for this build
#
# Every finding fails the run: UBSan reports abort (-fno-sanitize-recover),
# ASan and LSan reports make the process exit non-zero, and every report of
# any process (a test, a forked check child, a foreground or background
# daemon) is also written under ASAN_BUILD/sanitizer-logs/, which must stay
# empty; the script prints whatever lands there.
set -euo pipefail
SRCDIR=${SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
ASAN_BUILD=${ASAN_BUILD:-$SRCDIR/build-asan}
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(unit mount)

# Built by tests/build.sh against the system's libfuse (3.14 on Debian 12,
# no passthrough) unless SANITIZE_LIBFUSE says otherwise: the main build
# (build/) runs the suites with passthrough on the private libfuse 3.18,
# this one runs them on the fallback, so CI tests both without a third pass.
# -Dverify=enabled: every stateful module checks its invariants at each
# release of its lock (include/base/dlcache/verify.h) and aborts if broken.
BUILD=$ASAN_BUILD DLC_LIBFUSE=${SANITIZE_LIBFUSE:-system} "$SRCDIR/tests/build.sh" \
	-Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=all -Dverify=enabled

logs=$ASAN_BUILD/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
# A daemon that detached has no terminal: reports must reach a file.
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:strict_string_checks=1:suppressions=$SRCDIR/tests/asan.supp"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
# Reports that belong to libraries (libnfs 4.0): see asan.supp and lsan.supp.
export LSAN_OPTIONS="suppressions=$SRCDIR/tests/lsan.supp:print_suppressions=0"
export STRESS_SECONDS=${STRESS_SECONDS:-10}
# Mount suites that leave out what only repeats the main build's coverage.
export DLC_SANITIZE=1
# The unit cases' own time limits (libcheck's), stretched as meson's are:
# under ASan the fetch and capacity cases run about three times slower.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}

args=()
for s in "${suites[@]}"; do args+=(--suite "$s"); done
case " ${suites[*]} " in *" torch "*) ;; *) args+=(--no-suite torch) ;; esac
rc=0
meson test -C "$ASAN_BUILD" --no-rebuild --print-errorlogs --timeout-multiplier 3 \
	"${args[@]}" || rc=$?

if [ -n "$(find "$logs" -type f -print -quit)" ]; then
	for f in "$logs"/*; do
		echo "--- $f"
		head -n 60 "$f"
	done
	echo "FAIL: sanitizer reports (above, and in $logs)" >&2
	exit 1
fi
[ "$rc" -eq 0 ] || { echo "FAIL: a suite failed under ASan and UBSan" >&2; exit "$rc"; }
echo "unit and mount suites pass under ASan, LSan and UBSan"
