#!/usr/bin/env bash
# tests/bench/announce.sh [SAMPLES] [EPOCHS] - issue 14's announced traces
# through a real mount: importance-sampled jobs (tests/bench/announce.py:
# lognormal losses; the helper's CacheAwareSampler (JOBS=sampler-replacement: its
# draw with replacement), and draws by the
# weights alone announced as each epoch starts or one epoch early) read
# SAMPLES files of one block each for EPOCHS epochs over a fresh cache of
# FRACTIONS of them (policy=importance, one prefetch thread, the default
# window; PREFETCH_OPTS adds options, DLCACHE picks the binary); prints
# each job's source fetches against Belady's MIN's misses on the trace it
# read.  Counts, not times: the load of the machine does not move them.
. "$(dirname "$0")/lib.sh"
SAMPLES=${1:-4000}
EPOCHS=${2:-5}
FRACTIONS=${FRACTIONS:-0.1 0.2 0.5}
DATA=/var/tmp/dlcache-bench-announce-$SAMPLES
if [ ! -f "$DATA/complete" ]; then
	rm -rf "$DATA"
	python3 - "$DATA/src/train" "$SAMPLES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "c%02d" % (i % 40))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "s%06d.bin" % i), "wb") as f:
        f.write(i.to_bytes(4, "little") * 500)    # 2000 bytes: one 4 KiB block
PY
	touch "$DATA/complete"
fi
echo "$SAMPLES files of 2000 bytes, $EPOCHS epochs, importance sampling by lognormal losses"
printf '%-6s %-19s %9s %12s %11s %7s\n' cache job accesses source-opens min-misses "x MIN"
for f in $FRACTIONS; do
	room=$(awk "BEGIN {printf \"%d\", $f * $SAMPLES}")
	for mode in ${JOBS:-sampler weights weights-ahead}; do
		rm -rf "$WORK/cache"
		mount_dlcache "$DATA/src" "policy=importance,cache_size=$((room * 4096)),prefetch_threads=1${PREFETCH_OPTS:+,$PREFETCH_OPTS}"
		line=$(python3 tests/bench/announce.py "$MNT" "$SAMPLES" "$EPOCHS" "$room" "$mode")
		[ -n "${VERBOSE:-}" ] && echo "$line" && python3 -c "import json;s=json.load(open(\"$MNT/.stats\"));print({k:s[k] for k in (\"hits\",\"misses\",\"prefetches\",\"prefetch_hits\",\"admissions\",\"evictions\",\"bypasses\")}, s[\"remote_ops\"])"
		unmount_dlcache
		python3 -c 'import json, sys
r = json.loads(sys.argv[2])
print("%-6s %-19s %9d %12d %11d %7.3f" % (sys.argv[1], r["job"], r["accesses"], r["source_opens"], r["min_misses"], r["ratio"]))' "$f" "$line"
	done
done
