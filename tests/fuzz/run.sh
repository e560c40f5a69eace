#!/usr/bin/env bash
# tests/fuzz/run.sh - builds the libFuzzer targets with clang, ASan and
# UBSan in their own build directory, replays the checked-in corpus, then
# fuzzes each target for a while.
#
#     tests/fuzz/run.sh [TARGET...]         # control, options (default: both)
#
# Environment:
#     FUZZ_BUILD    build directory (default: build-fuzz in the source tree)
#     FUZZ_SECONDS  seconds of fuzzing per target (default: 60, or 10 with
#                   CI set: a fresh clone's CI run keeps within its time
#                   budget; 0 replays only)
#     SRCDIR        the source tree (default: this script's ../..)
#
# New inputs libFuzzer finds go to FUZZ_BUILD/corpus-TARGET, which later
# runs start from, so the checked-in seeds (tests/fuzz/corpus/TARGET) stay
# small.  A crash, leak, sanitizer report or failed CHECK stops the run: the
# input is saved as FUZZ_BUILD/artifacts/TARGET-crash-HASH and the script
# exits 1.  Reproduce with FUZZ_BUILD/tests/fuzz/fuzz_TARGET FILE; then add
# FILE to tests/fuzz/corpus/TARGET and a case to tests/unit/check_TARGET.c.
# Without clang and libFuzzer (Debian: clang, libclang-rt-14-dev) it skips
# with status 77.
set -euo pipefail
SRCDIR=${SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FUZZ_BUILD=${FUZZ_BUILD:-$SRCDIR/build-fuzz}
if [ -n "${CI:-}" ]; then FUZZ_SECONDS=${FUZZ_SECONDS:-10}; else FUZZ_SECONDS=${FUZZ_SECONDS:-60}; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(control options)

CLANG=${CLANG:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$CLANG" ]; then
	echo "SKIP: clang is not installed (apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" 2>/dev/null; then
	echo "SKIP: $CLANG cannot link libFuzzer (apt-get install libclang-rt-14-dev)"
	exit 77
fi

# With CI set, warnings are errors, as in tests/run.sh.
werror=false
[ -n "${CI:-}" ] && werror=true
if [ ! -d "$FUZZ_BUILD/meson-private" ]; then
	CC=$CLANG meson setup "$FUZZ_BUILD" "$SRCDIR" -Dfuzz=enabled -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false -Dwerror=$werror \
		-Dc_args=-fno-sanitize-recover=all >/dev/null
else
	meson configure "$FUZZ_BUILD" -Dwerror=$werror >/dev/null
fi
for t in "${targets[@]}"; do
	[ -f "$SRCDIR/tests/fuzz/fuzz_$t.c" ] ||
		{ echo "no fuzz target '$t' (there are: control, options)" >&2; exit 2; }
done
# Only the targets asked for: the daemon and the rest are built (and
# tested) by the main build already.
ninja -C "$FUZZ_BUILD" "${targets[@]/#/tests/fuzz/fuzz_}" >"$FUZZ_BUILD/ninja.log" 2>&1 || {
	grep -E "error|undefined" "$FUZZ_BUILD/ninja.log" | tail -n 20 >&2
	echo "tests/fuzz/run.sh: building the fuzz targets with clang failed (errors above, all of it in $FUZZ_BUILD/ninja.log)." >&2
	exit 1
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$FUZZ_BUILD/artifacts"
for t in "${targets[@]}"; do
	exe=$FUZZ_BUILD/tests/fuzz/fuzz_$t
	seeds=$SRCDIR/tests/fuzz/corpus/$t
	scratch=$FUZZ_BUILD/corpus-$t
	[ -x "$exe" ] || { echo "no fuzz target '$t' (built: control, options)" >&2; exit 2; }
	mkdir -p "$scratch"
	echo "== fuzz_$t: replaying $(find "$seeds" -type f | wc -l) checked-in inputs"
	if ! "$exe" -runs=0 -artifact_prefix="$FUZZ_BUILD/artifacts/$t-" "$seeds" \
		>"$FUZZ_BUILD/replay-$t.log" 2>&1; then
		tail -n 60 "$FUZZ_BUILD/replay-$t.log" >&2
		echo "FAIL: fuzz_$t fails on a checked-in input of $seeds" >&2
		exit 1
	fi
	[ "$FUZZ_SECONDS" -gt 0 ] || continue
	# Keep the scratch corpus small: merge it down to what adds coverage.
	if [ "$(find "$scratch" -type f | wc -l)" -gt 1000 ]; then
		rm -rf "$scratch.merged" && mkdir "$scratch.merged"
		if "$exe" -merge=1 "$scratch.merged" "$scratch" >"$FUZZ_BUILD/merge-$t.log" 2>&1; then
			rm -rf "$scratch" && mv "$scratch.merged" "$scratch"
		fi
	fi
	echo "== fuzz_$t: fuzzing for $FUZZ_SECONDS s"
	# -timeout: an input that takes 10 s is a hang; -rss_limit_mb bounds memory.
	if ! "$exe" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
		-dict="$SRCDIR/tests/fuzz/$t.dict" -print_final_stats=1 \
		-artifact_prefix="$FUZZ_BUILD/artifacts/$t-" \
		"$scratch" "$seeds" >"$FUZZ_BUILD/fuzz-$t.log" 2>&1; then
		tail -n 60 "$FUZZ_BUILD/fuzz-$t.log" >&2
		echo "FAIL: fuzz_$t found a crash; the input is in $FUZZ_BUILD/artifacts/" >&2
		exit 1
	fi
	grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb)' \
		"$FUZZ_BUILD/fuzz-$t.log" || true
	echo "scratch corpus: $(find "$scratch" -type f | wc -l) files in $scratch"
done
