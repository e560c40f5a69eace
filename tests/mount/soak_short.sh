#!/usr/bin/env bash
# Two minutes of tests/bench/soak.sh: 64 block streams, shuffled small
# files, an announced order, .control writers, .stats and .cached readers
# and readers interrupted by SIGINT and SIGUSR1, on one mount whose source
# stalls and recovers, under memory_limit=256M.  Passes when the soak meets
# every target: no wrong byte, no reader stuck (a call that has not returned
# after 30 s ends the run as a hang), RSS within memory_limit + 128 MiB,
# descriptors flat, no call longer than source_timeout + 1 s, throughput of
# the last fifth at least 90 % of the first.  Under tests/sanitize.sh
# (DLC_SANITIZE) one minute, and only the bytes, hangs and descriptors are
# judged: the sanitizers' own memory and time are not the daemon's.
. "$(dirname "$0")/lib.sh"
command -v "${CC:-cc}" >/dev/null || { echo "SKIP: no C compiler for the soak's stall shim (tests/bench/soak_stall.c)"; exit 77; }

test_two_minutes_of_mixed_load_meet_the_soak_targets() {
	local minutes=2 correctness=0
	if [ -n "${DLC_SANITIZE:-}" ]; then
		minutes=1
		correctness=1
	fi
	# 80 shards of 16 MiB and 5000 small files (1.3 GiB) over a 512 MiB
	# cache: misses and evictions all along.
	SOAK_MINUTES=$minutes SOAK_CORRECTNESS_ONLY=$correctness SOAK_DIR=$WORK/soak \
		SOAK_LARGE_FILES=80 SOAK_LARGE_MB=16 SOAK_SMALL_FILES=5000 SOAK_CACHE_SIZE=512M \
		bash "$(dirname "$0")/../bench/soak.sh" || fail "the soak missed a target (above)"
}

run_tests
