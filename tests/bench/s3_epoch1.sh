#!/usr/bin/env bash
# tests/bench/s3_epoch1.sh [FILES] [LATENCY_MS] - the first epoch over an S3
# store with LATENCY_MS (default 10) added to every request
# (tests/mount/fake_s3.py), against the store's own limit:
#
#  limit      FILES GETs by N curl processes at once, each on one kept
#             connection, for N = READERS and N = prefetch_threads (16):
#             what the server itself answers in files/s
#  plain      READERS (8) reader processes (peers_read.py) read the epoch's
#             shuffled order through a fresh mount, nothing announced:
#             target 0.8 x min(READERS / latency, limit at READERS)
#  announce   the same with the order written first as prefetch lines:
#             target 0.8 x min(prefetch_threads / latency, limit at 16)
#
# FILES (default 2000) objects of SIZE_KB (default 100) KiB in 20 prefixes,
# built once under /var/tmp.  RUNS (default 3) rounds; the best of each is
# printed with the requests the server counted.  MOUNT_OPTS adds mount
# options (e.g. prefetch_threads=32).  Needs root and /dev/fuse.
. "$(dirname "$0")/lib.sh"
FILES=${1:-2000}
LATENCY_MS=${2:-10}
SIZE_KB=${SIZE_KB:-100}
READERS=${READERS:-8}
RUNS=${RUNS:-3}
PREFETCH_THREADS=16
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-s3-epoch1-$FILES-$SIZE_KB}
ROOT=$BENCH_DIR/s3

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating $FILES objects of $SIZE_KB KiB under $ROOT/bucket/data ..."
	rm -rf "$ROOT"
	python3 - "$ROOT/bucket/data" "$FILES" "$SIZE_KB" <<'PY'
import os, random, sys
root, n, kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(5)
for i in range(n):
    d = os.path.join(root, "c%03d" % (i % 20))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "s%06d.bin" % i), "wb") as f:
        f.write(rng.randbytes(kb << 10))
PY
	touch "$BENCH_DIR/complete"
fi
if [[ ",${MOUNT_OPTS:-}," =~ ,prefetch_threads=([0-9]+), ]]; then
	PREFETCH_THREADS=${BASH_REMATCH[1]}
fi

FAKE_PID=
stop_fake() { if [ -n "$FAKE_PID" ]; then kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null; fi; FAKE_PID=; }
trap 'cleanup; stop_fake' EXIT
python3 tests/mount/fake_s3.py --root "$ROOT" --port-file "$WORK/port" --latency "$LATENCY_MS" \
	2>"$WORK/fake.log" &
FAKE_PID=$!
until [ -s "$WORK/port" ]; do sleep 0.05; done
URL=http://127.0.0.1:$(cat "$WORK/port")
export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_SESSION_TOKEN AWS_PROFILE
count() { curl -s "$URL/_fake/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
clear() { curl -s -X POST "$URL/_fake/clear" >/dev/null; }

(cd "$ROOT/bucket/data" && find . -type f | sed 's|^\./||' | sort) >"$WORK/paths"
python3 - "$WORK/paths" "$WORK/order" <<'PY'
import random, sys
paths = open(sys.argv[1]).read().split()
random.Random(1).shuffle(paths)
open(sys.argv[2], "w").write("\n".join(paths) + "\n")
PY
# curl's config: one GET per object, bodies thrown away (ETags computed
# by a first untimed pass, as a listing would).
sed "s|.*|url = \"$URL/bucket/data/&\"\noutput = \"/dev/null\"|" "$WORK/order" >"$WORK/curl.cfg"
curl -s --no-progress-meter --parallel --parallel-max 16 -K "$WORK/curl.cfg" >/dev/null 2>&1

# limit_clients N: the objects by N curl processes at once, each GETting its
# share one after the other on one kept connection: N clients as dlcache's
# threads are, each with its own share of the CPU (one curl --parallel
# process gets one thread's share on a loaded machine, and measured less
# than dlcache itself).
limit_clients() {
	local i pids=()
	for i in $(seq 0 $(($1 - 1))); do
		awk -v n="$1" -v i="$i" 'int((NR - 1) / 2) % n == i' "$WORK/curl.cfg" >"$WORK/curl.$i.cfg"
		curl -s --no-progress-meter -K "$WORK/curl.$i.cfg" >/dev/null 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
}

echo "$FILES objects of $SIZE_KB KiB, fake_s3.py with $LATENCY_MS ms a request; $READERS readers;" \
	"prefetch_threads=$PREFETCH_THREADS; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
for run in $(seq 1 "$RUNS"); do
	for n in "$READERS" "$PREFETCH_THREADS"; do
		clear
		t0=$(now)
		limit_clients "$n"
		keep_min "limit$n" "$(since "$t0")"
	done
	for mode in plain announce; do
		rm -rf "$WORK/cache"
		mount_dlcache s3://bucket/data "s3_endpoint=$URL${MOUNT_OPTS:+,$MOUNT_OPTS}"
		drop_caches
		clear
		control=
		[ "$mode" = announce ] && control=$MNT/.control
		out=$(python3 tests/bench/peers_read.py "$MNT" "$WORK/order" "$READERS" small $control)
		gets=$(count GET)
		unmount_dlcache
		set -- $out
		echo "run $run $mode: $1 s, $gets GET"
		keep_min "$mode" "$1"
	done
done
rate() { awk "BEGIN {printf \"%.0f\", $FILES / $1}"; }
min2() { awk "BEGIN {print ($1 < $2) ? $1 : $2}"; }
limit_readers=$(rate "${best[limit$READERS]}")
limit_prefetch=$(rate "${best[limit$PREFETCH_THREADS]}")
ideal_readers=$((READERS * 1000 / LATENCY_MS))
ideal_prefetch=$((PREFETCH_THREADS * 1000 / LATENCY_MS))
target_plain=$(min2 "$ideal_readers" "$limit_readers")
target_announce=$(min2 "$ideal_prefetch" "$limit_prefetch")
printf '| %s | time | files/s | limit (files/s) | vs limit | target (0.8) |\n' "first epoch, best of $RUNS"
echo '|---|---|---|---|---|---|'
printf '| curl, %d processes | %s s | %s | %d/%d ms = %d | | |\n' "$READERS" "${best[limit$READERS]}" "$limit_readers" "$READERS" "$LATENCY_MS" "$ideal_readers"
printf '| curl, %d processes | %s s | %s | %d/%d ms = %d | | |\n' "$PREFETCH_THREADS" "${best[limit$PREFETCH_THREADS]}" "$limit_prefetch" "$PREFETCH_THREADS" "$LATENCY_MS" "$ideal_prefetch"
printf '| dlcache, %d readers | %s s | %s | %s | %s | %s |\n' "$READERS" "${best[plain]}" "$(rate "${best[plain]}")" "$target_plain" \
	"$(awk "BEGIN {printf \"%.2f\", $(rate "${best[plain]}") / $target_plain}")" \
	"$(awk "BEGIN {print ($(rate "${best[plain]}") >= 0.8 * $target_plain) ? \"met\" : \"not met\"}")"
printf '| dlcache, %d readers, order announced | %s s | %s | %s | %s | %s |\n' "$READERS" "${best[announce]}" "$(rate "${best[announce]}")" "$target_announce" \
	"$(awk "BEGIN {printf \"%.2f\", $(rate "${best[announce]}") / $target_announce}")" \
	"$(awk "BEGIN {print ($(rate "${best[announce]}") >= 0.8 * $target_announce) ? \"met\" : \"not met\"}")"
