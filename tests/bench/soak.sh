#!/usr/bin/env bash
# tests/bench/soak.sh - a long mixed load on one mount, judged against
# production targets (issue 36): SOAK_MINUTES (default 30) of
#   - 64 block streams (SOAK_STREAMS): whole files larger than cache_max_file,
#     read by blocks, one after another, in 1 MiB reads;
#   - 4 readers of the small files, each in its own shuffle;
#   - an announced order: 512 prefetch lines to .control, then those files;
#   - a .control writer (200 score lines every 0.2 s, "epoch N" every 30 s);
#   - a reader of .stats (every 0.5 s) and .cached and .chunks (every 3 s);
#   - 4 readers interrupted by signals mid-read: SIGUSR1 (handled: the read
#     ends with EINTR and the reader goes on) or SIGINT (the reader dies and
#     is started again), one every 0.2-1 s;
#   - a source that stalls and recovers: an LD_PRELOAD shim in the daemon
#     (tests/bench/soak_stall.c) holds every open and read of the source
#     while a flag file exists; about once a minute a stall of 3 s and one of
#     source_timeout + 2 s (whose reads fail with EIO, as they must);
# on a directory source with source_delay=5ms (with SOAK_PACKED=1 the same
# tree packed in tar chunks of 64 MiB, the daemon under ulimit -n 256 so
# that it keeps at most 64 chunks open and opens and closes chunks all
# along, stalls included), memory_limit=256M, cache_max_file=8M
# (block_size 4M), cache_size=1G, source_timeout=5s.  Before the counted
# minutes, the cache is filled to 90 % (by 4 readers, at most
# SOAK_FILL_SECONDS, default 180) and the whole load runs for
# SOAK_WARMUP_SECONDS (a fifth of the run, at most 3 minutes; watched for
# hangs and wrong bytes, not counted), so that the run starts in the steady
# state: a full cache, evicting, holding the load's own mix of files.
# Every byte read is checked against the source (blake2b per MiB, hashed
# once).  Each minute it prints the bytes served, wrong bytes, errors,
# interrupted reads, signals sent, the daemon's peak RSS against
# memory_limit, its open descriptors (less libfuse's per-thread /dev/fuse
# clones and pipes) and the longest single open/read/write of any reader.
# Targets, checked at the end (PASS/FAIL per target, exit status 0 or 1):
#   0 wrong bytes; RSS <= memory_limit + 128 MiB (the 32 MiB of spare block
#   buffers and 64 MiB of source read buffers the README allows beyond the
#   limit, plus 32 MiB of code, SQLite and thread stacks); descriptors
#   flat (median of the last minute <= median of the first + max(16, 10 %));
#   no call longer than source_timeout + 1 s; throughput of the last 5
#   minutes (last fifth in runs under 25 minutes) at least 90 % of the
#   first.
# A reader stuck in one call for SOAK_HANG seconds (default 30) ends the
# run at once: it prints HANG with the stuck readers and files, .stats'
# memory figures and where the daemon's threads wait (gdb's stacks too when
# gdb is installed), and exits 3 (4 when the daemon died).  Cleanup is
# always done: the readers are killed by PID, the mount is unmounted (the
# FUSE connection aborted when the daemon does not answer) and the daemon
# stopped by PID (SIGKILL after 10 s).
#
# Variables: SOAK_MINUTES, SOAK_STREAMS (0 leaves the block streams out),
# SOAK_LARGE_FILES (96) of SOAK_LARGE_MB (24), SOAK_SMALL_FILES (20000) of
# about SOAK_SMALL_KB (16), SOAK_MEMORY_LIMIT (256M), SOAK_CACHE_SIZE (1G),
# SOAK_SOURCE_TIMEOUT (seconds, 5), SOAK_STALL (0: no stalls), SOAK_PACKED
# (1: the packed tree, packed once beside the dataset), SOAK_OPTS
# (more mount options), SOAK_HANG, SOAK_FILL_SECONDS, SOAK_WARMUP_SECONDS,
# SOAK_RSS_OVERHEAD_MB (128), SOAK_SLOW_LOG (a file to append each call
# slower than 5 s to: its start on CLOCK_MONOTONIC, the clock of the
# kernel's trace_clock "mono", its thread, file, offset and outcome, with
# each stall's start and end; for tracing a long wait read(2) by read(2)
# with the fuse tracepoints), SOAK_INFO (targets printed as "info", not
# judged, comma-separated, of rss, fds, wait, throughput: see
# tests/mount/soak_short.sh), SOAK_DIR (the dataset, built once; default
# under /var/tmp), DLCACHE (the binary).  Needs root, /dev/fuse, a C
# compiler (for the shim) and about 3 GB under SOAK_DIR and 1 GB for the
# cache.  tests/mount/soak_short.sh runs it for 2 minutes in CI.
. "$(dirname "$0")/lib.sh"
SOAK_MINUTES=${SOAK_MINUTES:-30}
SOAK_STREAMS=${SOAK_STREAMS:-64}
SOAK_LARGE_FILES=${SOAK_LARGE_FILES:-96}
SOAK_LARGE_MB=${SOAK_LARGE_MB:-24}
SOAK_SMALL_FILES=${SOAK_SMALL_FILES:-20000}
SOAK_SMALL_KB=${SOAK_SMALL_KB:-16}
SOAK_MEMORY_LIMIT=${SOAK_MEMORY_LIMIT:-256M}
SOAK_CACHE_SIZE=${SOAK_CACHE_SIZE:-1G}
SOAK_SOURCE_TIMEOUT=${SOAK_SOURCE_TIMEOUT:-5}
SOAK_STALL=${SOAK_STALL:-1}
SOAK_HANG=${SOAK_HANG:-30}
SOAK_FILL_SECONDS=${SOAK_FILL_SECONDS:-180}
# A fifth of the run, at most 3 minutes.
SOAK_WARMUP_SECONDS=${SOAK_WARMUP_SECONDS:-$(awk "BEGIN {w = $SOAK_MINUTES * 12; print (w > 180 ? 180 : w)}")}
SOAK_RSS_OVERHEAD_MB=${SOAK_RSS_OVERHEAD_MB:-128}
SOAK_DIR=${SOAK_DIR:-/var/tmp/dlcache-soak-$SOAK_LARGE_FILES-$SOAK_LARGE_MB-$SOAK_SMALL_FILES-$SOAK_SMALL_KB}
MAX_FILE=8M
SRC=$SOAK_DIR/src
BENCH=$PWD/tests/bench

bytes_of() {  # bytes_of 256M
	python3 -c '
import sys
t = sys.argv[1]
print(int(float(t.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(t[-1], 1)))' "$1"
}

# The dataset and its hashes, built once.
if [ ! -f "$SOAK_DIR/complete" ]; then
	echo "creating $SOAK_LARGE_FILES files of $SOAK_LARGE_MB MiB and $SOAK_SMALL_FILES of about $SOAK_SMALL_KB KiB under $SRC ..."
	rm -rf "$SOAK_DIR"
	mkdir -p "$SRC/shards"
	python3 - "$SRC" "$SOAK_LARGE_FILES" "$SOAK_LARGE_MB" "$SOAK_SMALL_FILES" "$SOAK_SMALL_KB" <<'PY'
import os, random, sys
src, nlarge, large_mb, nsmall, small_kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(36)
for i in range(nlarge):
    with open(os.path.join(src, "shards", "shard-%04d.tar" % i), "wb") as f:
        # A few KiB over a whole number of MiB: blocks and pieces do not align.
        for _ in range(large_mb):
            f.write(rng.randbytes(1 << 20))
        f.write(rng.randbytes(rng.randrange(1, 8192)))
per = 100
for i in range(nsmall):
    d = os.path.join(src, "train", "n%08d" % (i // per))
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    size = max(1, int(rng.uniform(0.5, 1.5) * small_kb * 1024))
    with open(os.path.join(d, "n%08d_%d.JPEG" % (i // per, i)), "wb") as f:
        f.write(rng.randbytes(size))
PY
	python3 "$BENCH/soak.py" manifest "$SRC" "$SOAK_DIR/manifest.json"
	touch "$SOAK_DIR/complete"
fi

MOUNT_SRC=$SRC
NOFILE=$(ulimit -n)
if [ "${SOAK_PACKED:-0}" = 1 ]; then
	if [ ! -f "$SOAK_DIR/packed.complete" ]; then
		echo "packing $SRC in chunks of 64 MiB ..."
		rm -rf "$SOAK_DIR/packed"
		"$DLCACHE" pack "$SRC" "$SOAK_DIR/packed" --chunk-size 64M >/dev/null
		touch "$SOAK_DIR/packed.complete"
	fi
	MOUNT_SRC=$SOAK_DIR/packed
	NOFILE=256
fi

# The stall shim, built for this run.
SHIM=$WORK/soak_stall.so
"${CC:-cc}" -shared -fPIC -O2 -o "$SHIM" "$BENCH/soak_stall.c" -ldl
PRELOAD=$SHIM
# A sanitizer build wants its runtime first in the list.
asan=$(ldd "$DLCACHE" 2>/dev/null | awk '/libasan\.so/ {print $3}')
[ -n "$asan" ] && PRELOAD=$asan:$SHIM

# Cleanup, whatever happened: the readers, the mount, the daemon, by PID.
SUP_PID=
CONN=
cleanup() {
	local rc=$? pid i
	set +e
	[ -n "$SUP_PID" ] && kill "$SUP_PID" 2>/dev/null && wait "$SUP_PID" 2>/dev/null
	if [ -f "$WORK/out/workers.pids" ]; then
		while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$WORK/out/workers.pids"
	fi
	rm -f "$WORK/stall"
	if mountpoint -q "$MNT" 2>/dev/null; then
		if ! timeout 10 fusermount3 -u "$MNT" 2>/dev/null; then
			# A daemon that does not answer: abort its connection.
			[ -n "$CONN" ] && [ -w "/sys/fs/fuse/connections/$CONN/abort" ] &&
				echo 1 >"/sys/fs/fuse/connections/$CONN/abort"
			umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
		fi
	fi
	if [ -n "$PID" ]; then
		for ((i = 0; i < 100; i++)); do
			kill -0 "$PID" 2>/dev/null || break
			[ "$i" -eq 0 ] && kill "$PID" 2>/dev/null
			sleep 0.1
		done
		if kill -0 "$PID" 2>/dev/null; then
			echo "soak: the daemon did not exit within 10 s of SIGTERM; SIGKILL" >&2
			kill -KILL "$PID" 2>/dev/null
		fi
		wait "$PID" 2>/dev/null
	fi
	rm -rf "$WORK"
	exit "$rc"
}

rm -rf "$WORK/cache"
mkdir -p "$WORK/out"
OPTS="cache_size=$SOAK_CACHE_SIZE,memory_limit=$SOAK_MEMORY_LIMIT,cache_max_file=$MAX_FILE,source_timeout=${SOAK_SOURCE_TIMEOUT}s,source_delay=5ms${SOAK_OPTS:+,$SOAK_OPTS}"
echo "soak: $DLCACHE on $MOUNT_SRC, -o $OPTS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
(
	ulimit -n "$NOFILE"
	DLC_STALL_FLAG=$WORK/stall DLC_STALL_ROOT=$(realpath "$MOUNT_SRC") LD_PRELOAD=$PRELOAD \
		exec "$DLCACHE" mount "$MOUNT_SRC" "$MNT" -f -o "cache_dir=$WORK/cache,log_level=warning,$OPTS" 2>"$WORK/daemon.log"
) &
PID=$!
for ((i = 0; i < 1500; i++)); do
	[ -e "$MNT/.stats" ] && break
	kill -0 "$PID" 2>/dev/null || { cat "$WORK/daemon.log" >&2; echo "soak: the daemon exited before the mount was ready" >&2; exit 1; }
	sleep 0.02
done
[ -e "$MNT/.stats" ] || { echo "soak: the mount did not answer in 30 s" >&2; exit 1; }
CONN=$(mountpoint -d "$MNT" | cut -d: -f2)

args=(--mount "$MNT" --src "$SRC" --manifest "$SOAK_DIR/manifest.json" --out "$WORK/out"
	--daemon-pid "$PID" --minutes "$SOAK_MINUTES" --max-file "$(bytes_of $MAX_FILE)"
	--memory-limit "$(bytes_of "$SOAK_MEMORY_LIMIT")" --rss-overhead $((SOAK_RSS_OVERHEAD_MB << 20))
	--source-timeout "$SOAK_SOURCE_TIMEOUT" --streams "$SOAK_STREAMS" --hang "$SOAK_HANG"
	--warmup "$SOAK_WARMUP_SECONDS")
[ "$SOAK_STALL" = 0 ] && args+=(--no-stall) || args+=(--flag "$WORK/stall")
[ -n "${SOAK_INFO:-}" ] && args+=(--info "$SOAK_INFO")
[ -n "${SOAK_SLOW_LOG:-}" ] && args+=(--slow-log "$(realpath -m "$SOAK_SLOW_LOG")")
# The run starts with a full cache (a minute or two to fill it).
timeout $((SOAK_FILL_SECONDS + 60)) python3 "$BENCH/soak.py" warmup "$MNT" "$SOAK_DIR/manifest.json" "$SOAK_FILL_SECONDS" ||
	{ echo "soak: the warm-up failed or did not end" >&2; exit 1; }
rc=0
python3 "$BENCH/soak.py" run "${args[@]}" &
SUP_PID=$!
wait "$SUP_PID" || rc=$?
SUP_PID=
if [ -s "$WORK/out/workers.log" ]; then
	echo "--- readers' messages (first of each kind) ---"
	grep -v '^WRONG' "$WORK/out/workers.log" | sed -E 's/\[[0-9]+\]//; s/ (train|shards)\/[^:]*//' |
		sort | uniq -c | sort -rn | head -n 12 || true
	grep '^WRONG' "$WORK/out/workers.log" | head -n 10 || true
fi
if [ -s "$WORK/daemon.log" ]; then
	echo "--- daemon log ($(wc -l <"$WORK/daemon.log") lines; each kind once) ---"
	sed -E 's/[0-9]+/N/g' "$WORK/daemon.log" | sort | uniq -c | sort -rn | head -n 12 || true
fi
exit "$rc"
