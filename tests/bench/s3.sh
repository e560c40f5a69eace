#!/usr/bin/env bash
# tests/bench/s3.sh [OBJECTS] [LATENCY_MS] [EPOCH_FILES] - an S3 source over the
# fake S3 server (tests/mount/fake_s3.py) with LATENCY_MS (default 10) added to
# every request, like a store in the same region:
#
#  1. the snapshot of OBJECTS (default 100,000) objects in 1000 prefixes:
#     dlcache snapshot (ListObjectsV2 by directory, 16 crawl threads) beside
#     one flat listing of the whole prefix (ListObjectsV2 without delimiter,
#     1000 keys a page, one page after the other, as `aws s3 ls --recursive`
#     does): time and requests;
#  2. a first epoch: EPOCH_FILES (default 5000) objects read once in random
#     order by 16 threads through the mount, counting the requests that reach
#     the store, beside what an uncached mount (mountpoint-s3, gcsfuse) would
#     send: a HEAD and a LIST per lookup of each path component, plus the GET,
#     and the time those lookups cost at the same latency and parallelism.
# Needs root and /dev/fuse; the tree is built once under /var/tmp.
. "$(dirname "$0")/lib.sh"
OBJECTS=${1:-100000}
LATENCY_MS=${2:-10}
EPOCH_FILES=${3:-5000}
READERS=16
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-s3-$OBJECTS}
ROOT=$BENCH_DIR/s3
DATA=$ROOT/bucket/data

if [ ! -f "$BENCH_DIR/complete" ]; then
	echo "creating $OBJECTS objects of 1-4 KiB in 1000 prefixes under $DATA ..."
	rm -rf "$ROOT"
	imagenet_names "$DATA" "$OBJECTS" 1024 4096
	touch "$BENCH_DIR/complete"
fi

# The fake server, stopped by its PID on exit (lib.sh's cleanup runs first).
FAKE_PID=
stop_fake() { [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null; FAKE_PID=; }
trap 'cleanup; stop_fake' EXIT
python3 tests/mount/fake_s3.py --root "$ROOT" --port-file "$WORK/port" --latency "$LATENCY_MS" \
	2>"$WORK/fake.log" &
FAKE_PID=$!
until [ -s "$WORK/port" ]; do sleep 0.05; done
URL=http://127.0.0.1:$(cat "$WORK/port")
export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench AWS_SHARED_CREDENTIALS_FILE=/dev/null
count() { curl -s "$URL/_fake/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
clear() { curl -s -X POST "$URL/_fake/clear" >/dev/null; }

# ETags are computed on first sight: one untimed listing warms the server.
python3 - "$URL" <<'PY' >/dev/null
import sys, urllib.request, urllib.parse, re
url, token = sys.argv[1], ""
while True:
    q = {"list-type": "2", "prefix": "data/"}
    if token: q["continuation-token"] = token
    body = urllib.request.urlopen(url + "/bucket?" + urllib.parse.urlencode(q)).read().decode()
    m = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
    if not m: break
    token = m.group(1)
PY

echo "== 1. listing $OBJECTS objects at ${LATENCY_MS} ms a request"
flat_best= snap_best=
for run in 1 2 3; do
	clear
	t0=$(now)
	python3 - "$URL" <<'PY' >"$WORK/flat"
import sys, urllib.request, urllib.parse, re
url, token, keys = sys.argv[1], "", 0
while True:
    q = {"list-type": "2", "prefix": "data/"}
    if token: q["continuation-token"] = token
    body = urllib.request.urlopen(url + "/bucket?" + urllib.parse.urlencode(q)).read().decode()
    keys += body.count("<Key>")
    m = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
    if not m: break
    token = m.group(1)
print(keys)
PY
	flat=$(since "$t0"); flat_lists=$(count LIST); flat_keys=$(cat "$WORK/flat")
	clear
	t0=$(now)
	"$DLCACHE" snapshot s3://bucket/data -o "$WORK/snap.db" --s3-endpoint "$URL" --threads 16 >"$WORK/snap.out" 2>/dev/null
	snap=$(since "$t0"); snap_lists=$(count LIST); snap_heads=$(count HEAD)
	echo "run $run: flat listing ${flat} s ($flat_lists LIST, $flat_keys keys); dlcache snapshot ${snap} s ($snap_lists LIST, $snap_heads HEAD): $(cat "$WORK/snap.out")"
	[ -z "$flat_best" ] || awk "BEGIN {exit !($flat < $flat_best)}" && flat_best=$flat
	[ -z "$snap_best" ] || awk "BEGIN {exit !($snap < $snap_best)}" && snap_best=$snap
done
echo "best: flat ${flat_best} s, snapshot ${snap_best} s; flat/snapshot = $(ratio "$flat_best" "$snap_best")x;" \
	"$(awk "BEGIN {printf \"%.0f\", $OBJECTS / $snap_best}") objects/s"

echo "== 2. first epoch: $EPOCH_FILES objects, $READERS readers, ${LATENCY_MS} ms a request"
mount_dlcache s3://bucket/data "snapshot=$WORK/snap.db,s3_endpoint=$URL"
clear
t0=$(now)
python3 - "$MNT" "$EPOCH_FILES" "$READERS" "$DATA" <<'PY'
import os, random, sys, threading
mnt, n, readers, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# ImageFolder's walk: every class directory listed, then files read in a shuffled order.
paths = []
for c in sorted(os.listdir(os.path.join(mnt, "train"))):
    paths += [os.path.join("train", c, f) for f in os.listdir(os.path.join(mnt, "train", c))]
random.Random(1).shuffle(paths)
paths = paths[:n]
lock = threading.Lock()
def work():
    while True:
        with lock:
            if not paths: return
            p = paths.pop()
        with open(os.path.join(mnt, p), "rb") as f, open(os.path.join(data, p), "rb") as g:
            if f.read() != g.read():
                sys.exit("bytes differ: " + p)
ts = [threading.Thread(target=work) for _ in range(readers)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
epoch=$(since "$t0")
gets=$(count GET); lists=$(count LIST); heads=$(count HEAD)
unmount_dlcache
# An uncached mount: a lookup per path component (train, the class, the file),
# each a HEAD and a LIST, the class directories (1000, 1 page each) and the
# root listed by the walk, and the GET.
lookups=$((EPOCH_FILES * 3))
model_meta=$((lookups * 2 + 1000 + 2))
model_total=$((model_meta + EPOCH_FILES))
model_meta_s=$(awk "BEGIN {printf \"%.1f\", $model_meta * $LATENCY_MS / 1000 / $READERS}")
echo "dlcache: ${epoch} s, $gets GET, $lists LIST, $heads HEAD ($((gets + lists + heads)) requests)"
echo "uncached mount (model): $model_total requests ($model_meta HEAD+LIST, $EPOCH_FILES GET);" \
	"its lookups alone cost ${model_meta_s} s at ${LATENCY_MS} ms and $READERS in parallel"
echo "requests: uncached/dlcache = $(ratio "$model_total" "$((gets + lists + heads))")x"
