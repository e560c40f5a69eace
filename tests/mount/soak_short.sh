#!/usr/bin/env bash
# Two minutes of tests/bench/soak.sh: 64 block streams, shuffled small
# files, an announced order, .control writers, .stats and .cached readers
# and readers interrupted by SIGINT and SIGUSR1, on one mount whose source
# stalls and recovers, under memory_limit=256M.  Passes when no byte read is
# wrong, no reader is stuck (a call that has not returned after 30 s ends
# the run as a hang), the daemon's RSS stays within memory_limit + 128 MiB,
# its descriptors stay flat and no call takes longer than source_timeout
# + 1 s.  The throughput of the last fifth against the first is printed but
# not judged here: fifths of 24 s on a shared 2-core machine measure the
# neighbours (0.7x to 2.7x for the same build); the 30-minute soak judges
# it over 5 minutes.  Under tests/sanitize.sh (DLC_SANITIZE) one minute,
# and only the bytes, hangs and descriptors are judged: the sanitizers' own
# memory and time are not the daemon's.
. "$(dirname "$0")/lib.sh"
command -v "${CC:-cc}" >/dev/null || { echo "SKIP: no C compiler for the soak's stall shim (tests/bench/soak_stall.c)"; exit 77; }

test_two_minutes_of_mixed_load_meet_the_soak_targets() {
	local minutes=2 info=throughput
	if [ -n "${DLC_SANITIZE:-}" ]; then
		minutes=1
		info=rss,wait,throughput
	fi
	# 80 shards of 16 MiB and 5000 small files (1.3 GiB) over a 512 MiB
	# cache: misses and evictions all along.
	SOAK_MINUTES=$minutes SOAK_INFO=$info SOAK_DIR=$WORK/soak \
		SOAK_LARGE_FILES=80 SOAK_LARGE_MB=16 SOAK_SMALL_FILES=5000 SOAK_CACHE_SIZE=512M \
		bash "$(dirname "$0")/../bench/soak.sh" || fail "the soak missed a target (above)"
}

run_tests
