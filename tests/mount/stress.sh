#!/usr/bin/env bash
# Concurrency stress: 32 readers (4 processes of 8 threads) read random
# files whole and by random ranges for $STRESS_SECONDS (default 60; 20 with
# CI set, which keeps a fresh clone's whole run within its budget) while
# ranks, prefetch, forget, epoch and reset lines stream into .control, a
# cache a quarter of the dataset's size admits and evicts all the time, and
# .stats and .cached are read and checked.  Every byte read is compared
# with the source.  Then: no error anywhere, the cache within cache_size
# with every file indexed, a clean unmount, and a remount that reuses the
# cache and serves every file right.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_lib.sh"

if [ -n "${CI:-}" ]; then SECONDS_TO_RUN=${STRESS_SECONDS:-20}; else SECONDS_TO_RUN=${STRESS_SECONDS:-60}; fi
CACHE_SIZE=$((6 * 1024 * 1024))

# 300 files: empty, tiny, sample-sized and a few above cache_max_file
# (read from the source by range), about 24 MiB in all.
python3 - "$SRC" <<'PY'
import os, random, sys
rng = random.Random(7)
root = sys.argv[1]
for i in range(300):
    d = os.path.join(root, "train", "c%02d" % (i % 12))
    os.makedirs(d, exist_ok=True)
    if i == 0:
        size = 0
    elif i % 100 == 1:
        size = rng.randrange(400 << 10, 1536 << 10)
    elif i % 10 == 2:
        size = rng.randrange(1, 512)
    else:
        size = rng.randrange(20 << 10, 140 << 10)
    with open(os.path.join(d, "f%03d.JPEG" % i), "wb") as f:
        f.write(rng.randbytes(size))
PY

# reader SEED SECONDS: 8 threads reading random files whole (after dropping
# their pages, so that reads reach the daemon) or by random ranges; prints
# "files bytes errors" and the first error.
reader() {
	python3 - "$SRC" "$MNT" "$1" "$2" <<'PY'
import os, random, sys, threading, time
src, mnt, seed, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
paths = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(os.path.join(src, "train")) for f in fs)
data = {p: open(os.path.join(src, p), "rb").read() for p in paths}
deadline = time.monotonic() + seconds
lock = threading.Lock()
totals = {"files": 0, "bytes": 0, "errors": 0, "first": ""}

def work(k):
    rng = random.Random(seed * 100 + k)
    files = nbytes = 0
    while time.monotonic() < deadline:
        p = rng.choice(paths)
        want = data[p]
        try:
            fd = os.open(os.path.join(mnt, p), os.O_RDONLY)
            try:
                if rng.random() < 0.5:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    got = b""
                    while True:
                        b = os.read(fd, rng.choice((4096, 65536, 1 << 20)))
                        if not b:
                            break
                        got += b
                    ok = got == want
                    nbytes += len(got)
                else:
                    ok = True
                    for _ in range(4):
                        off = rng.randrange(len(want) + 2)
                        n = rng.randrange(1, 200000)
                        got = os.pread(fd, n, off)
                        ok = ok and got == want[off:off + n]
                        nbytes += len(got)
            finally:
                os.close(fd)
            if not ok:
                raise ValueError("wrong bytes")
            files += 1
        except Exception as e:
            with lock:
                totals["errors"] += 1
                totals["first"] = totals["first"] or "%s: %r" % (p, e)
    with lock:
        totals["files"] += files
        totals["bytes"] += nbytes

threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(totals["files"], totals["bytes"], totals["errors"], totals["first"])
PY
}

# controller SECONDS: streams ranks and commands into .control, reads .stats
# and .cached; prints "lines errors" and the first error.
controller() {
	python3 - "$SRC" "$MNT" "$1" "$CACHE_SIZE" <<'PY'
import json, os, random, sys, time
src, mnt, seconds, capacity = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
paths = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, fs in os.walk(os.path.join(src, "train")) for f in fs)
known = set(paths)
rng = random.Random(1)
deadline = time.monotonic() + seconds
lines = errors = 0
first = ""
epoch = 0
while time.monotonic() < deadline:
    batch = ["%.6f %s" % (rng.random(), rng.choice(paths)) for _ in range(rng.randrange(1, 80))]
    r = rng.random()
    if r < 0.3:
        batch += ["prefetch " + p for p in rng.sample(paths, 20)]
    elif r < 0.4:
        batch.append("forget " + rng.choice(paths))
    elif r < 0.45:
        epoch += 1
        batch.append("epoch %d" % epoch)
    elif r < 0.46:
        batch.append("reset")
    try:
        with open(os.path.join(mnt, ".control"), "a") as f:
            f.write("\n".join(batch) + "\n")
        lines += len(batch)
        stats = json.load(open(os.path.join(mnt, ".stats")))
        cache = stats["cache"]
        if cache["bytes"] > capacity or cache["capacity"] != capacity:
            raise ValueError("cache over capacity: %r" % cache)
        cached = open(os.path.join(mnt, ".cached")).read().split("\n")[:-1]
        if not set(cached) <= known:
            raise ValueError(".cached lists unknown paths")
    except Exception as e:
        errors += 1
        first = first or repr(e)
    time.sleep(0.02)
print(lines, errors, first)
PY
}

test_32_readers_ranks_prefetch_and_evictions_serve_only_the_sources_bytes() {
	ALLOWED_LOG='^$'
	start_daemon "cache_size=$CACHE_SIZE,cache_max_file=256K,source_delay=200us,prefetch_window=16"
	local pids=() i results files=0 bytes=0 errors=0 first=""
	for i in 1 2 3 4; do
		reader "$i" "$SECONDS_TO_RUN" >"$WORK/reader.$i" &
		pids+=($!)
	done
	controller "$SECONDS_TO_RUN" >"$WORK/controller" &
	pids+=($!)
	for i in "${pids[@]}"; do
		wait_gone "$i" $((SECONDS_TO_RUN + 120)) "a stress process"
		wait "$i" || fail "a stress process failed"
	done
	for i in 1 2 3 4; do
		read -r f b e rest <"$WORK/reader.$i"
		files=$((files + f)) bytes=$((bytes + b)) errors=$((errors + e))
		[ -n "$rest" ] && [ -z "$first" ] && first=$rest
	done
	read -r lines cerrors cfirst <"$WORK/controller"
	[ "$errors" -eq 0 ] || fail "$errors reads failed; first: $first"
	[ "$cerrors" -eq 0 ] || fail "$cerrors control or stats checks failed; first: $cfirst"
	[ "$files" -gt 0 ] || fail "nothing was read"
	kill -0 "$DAEMON_PID" || fail "the daemon died"
	expect_eq "corrupt" "$(stat_value corrupt)" 0
	expect_eq "remote errors" "$(stat_value remote_errors)" 0
	expect_eq "control errors" "$(stat_value control_errors)" 0
	local evictions admissions entries
	evictions=$(stat_value evictions)
	admissions=$(stat_value admissions)
	[ "$evictions" -gt 0 ] || fail "nothing was evicted: the stress did not churn the cache"
	echo "stress: 32 readers, $SECONDS_TO_RUN s: $files files read, $bytes bytes verified;" \
		"$lines control lines; $admissions admissions, $evictions evictions," \
		"$(stat_value prefetches) prefetches, $(stat_value hits) hits, $(stat_value misses) misses"
	# Quiet now: every cache file is indexed and the cache is within its size.
	sleep 1.5
	entries=$(stat_value cache.entries)
	expect_eq "cache files = entries" "$(find "$CACHE/data" -type f | wc -l)" "$entries"
	local used
	used=$(find "$CACHE/data" -type f -printf '%s\n' | awk '{s += int(($1 + 4095) / 4096) * 4096} END {print s + 0}')
	[ "$used" -le "$CACHE_SIZE" ] || fail "cache files take $used bytes, more than $CACHE_SIZE"
	expect_eq "tmp/ is empty" "$(find "$CACHE/tmp" -type f | wc -l)" 0
	stop_daemon
	start_daemon "cache_size=$CACHE_SIZE,cache_max_file=256K,policy=freeze"
	expect_eq "entries reused after remount" "$(stat_value cache.entries)" "$entries"
	expect_eq "files read after remount" "$(read_all_shuffled)" 300
	expect_eq "corrupt after remount" "$(stat_value corrupt)" 0
	# Every entry serves its file without the source: a whole file as a
	# hit, a file over cache_max_file from its block (one 4 MiB block each
	# here, so an entry is the whole file); every other file is opened on
	# the source once.
	expect_eq "source opens after remount (freeze)" "$(stat_value remote_ops.open)" $((300 - entries))
	[ "$(stat_value hits)" -le "$entries" ] || fail "more hits than entries after remount"
}

run_tests
