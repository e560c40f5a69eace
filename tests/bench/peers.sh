#!/usr/bin/env bash
# tests/bench/peers.sh [small|shards|all] - dlcache beside the FUSE mounts
# users run over S3 today, on one S3 server, with the same objects and the
# same readers (tests/bench/peers_read.py: READERS processes, a new random
# order each epoch, the page cache, dentries and inodes dropped before each
# epoch), epochs 1-3, each over a fresh cache:
#
#   dlcache            plain (no .control line at all)
#   dlcache+announce   the epoch's order written first as prefetch lines
#                      of MOUNT/.control (dlcache-control(5))
#   s3fs               s3fs-fuse (Debian's s3fs) with its disk cache, as its
#                      FAQ advises for reads: use_cache=DIR, and a stat
#                      cache that holds every object (max_stat_cache_size,
#                      stat_cache_expire), enable_noobj_cache, ro
#   rclone             rclone mount (Debian's rclone) with
#                      --vfs-cache-mode full, --vfs-cache-max-size above the
#                      dataset, --dir-cache-time 1000h, --use-server-modtime
#                      (no HEAD per object for its time, as rclone's S3 page
#                      advises), --read-only
#
# Datasets (built once under BENCH_DIR, default /var/tmp/dlcache-bench-peers):
#   small    FILES (2000) files of 80-120 KiB in 20 directories (ImageNet-like;
#            no deeper: s3rver 3.7 lists a common prefix only where an object
#            lies directly under it),
#            each read whole
#   shards   SHARDS (16) tar shards of 16-32 MiB of ~100 KiB members
#            (WebDataset-like), each streamed with Python's tarfile; dlcache
#            with cache_max_file=8M, so shards are read and cached by blocks
#
# Servers, for each latency in LATENCIES (default "0 10", milliseconds):
#   0        s3rver (npm, installed into DLC_S3RVER_DIR as tests/mount/s3.sh
#            does; the objects uploaded once with rclone) when npm is there,
#            else tests/mount/fake_s3.py
#   N > 0    tests/mount/fake_s3.py --latency N (every request waits N ms)
# All four mounts of one latency talk to the same server.  RUNS (default 3)
# rounds; DLCACHE_OPTS adds mount options to dlcache's.  The table has each time's minimum over the rounds, and the ratio
# of each mount's time to plain dlcache's (above 1: slower than dlcache).
# "mount" is the time until the mount answers: dlcache lists the whole
# prefix then (its snapshot), the others list lazily, during epoch 1.
# Needs root, /dev/fuse, s3fs and rclone (apt-get install s3fs rclone).
. "$(dirname "$0")/lib.sh"
WHICH=${1:-all}
RUNS=${RUNS:-3}
READERS=${READERS:-8}
FILES=${FILES:-2000}
SHARDS=${SHARDS:-16}
LATENCIES=${LATENCIES:-0 10}
SYSTEMS=${SYSTEMS:-dlcache dlcache+announce s3fs rclone}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-peers}
S3RVER_DIR=${DLC_S3RVER_DIR:-/var/tmp/dlcache-s3rver}
ROOT=$BENCH_DIR/root           # ROOT/bucket/{small,shards}/...
EPOCH_TIMEOUT=${EPOCH_TIMEOUT:-600}

for tool in s3fs rclone; do
	if [[ " $SYSTEMS " == *" $tool "* ]] && ! command -v "$tool" >/dev/null; then
		echo "peers.sh: $tool is missing; install it (apt-get install s3fs rclone) or leave it out of SYSTEMS=." >&2
		exit 1
	fi
done

# ---- the datasets, built once -------------------------------------------
if [ ! -f "$BENCH_DIR/complete-$FILES-$SHARDS" ]; then
	echo "creating $FILES files and $SHARDS shards under $ROOT/bucket ..."
	rm -rf "$ROOT" "$BENCH_DIR/s3rver"
	python3 - "$ROOT/bucket" "$FILES" "$SHARDS" <<'PY'
import io, os, random, sys, tarfile
root, files, shards = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(11)
for i in range(files):
    d = os.path.join(root, "small", "c%03d" % (i % 20))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "img_%05d.jpg" % i), "wb") as f:
        f.write(rng.randbytes(rng.randint(80 << 10, 120 << 10)))
os.makedirs(os.path.join(root, "shards"), exist_ok=True)
member = 0
for s in range(shards):
    target = rng.randint(16 << 20, 32 << 20)
    with tarfile.open(os.path.join(root, "shards", "shard-%05d.tar" % s), "w", format=tarfile.USTAR_FORMAT) as tar:
        size = 0
        while size < target:
            data = rng.randbytes(rng.randint(80 << 10, 120 << 10))
            info = tarfile.TarInfo("%08d.jpg" % member)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))
            size += len(data) + 512
            member += 1
PY
	touch "$BENCH_DIR/complete-$FILES-$SHARDS"
fi

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
# rclone (Go) fails at start when AWS_CA_BUNDLE names a file it cannot load,
# and no peer needs it for http on loopback.
unset AWS_CA_BUNDLE

# ---- the server, stopped by its PID --------------------------------------
SERVER_PID= URL= SERVER=
stop_server() {
	if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	SERVER_PID=
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rclone_remote() { echo ":s3,provider=Other,endpoint='$URL',access_key_id=$AWS_ACCESS_KEY_ID,secret_access_key=$AWS_SECRET_ACCESS_KEY,force_path_style=true,region=us-east-1:bucket"; }

have_s3rver() {
	[ -x "$S3RVER_DIR/node_modules/.bin/s3rver" ] && return 0
	command -v npm >/dev/null || return 1
	npm install --prefix "$S3RVER_DIR" --no-audit --no-fund s3rver@3.7.1 >"$WORK/npm.log" 2>&1
}

start_server() {   # start_server LATENCY_MS
	local port
	port=$(free_port)
	URL=http://127.0.0.1:$port
	if [ "$1" = 0 ] && have_s3rver; then
		SERVER="s3rver 3.7.1"
		mkdir -p "$BENCH_DIR/s3rver"
		# s3rver 3.7's continuation tokens need Node's legacy OpenSSL provider.
		NODE_OPTIONS=--openssl-legacy-provider "$S3RVER_DIR/node_modules/.bin/s3rver" --silent \
			-a 127.0.0.1 -p "$port" -d "$BENCH_DIR/s3rver" --configure-bucket bucket \
			>"$WORK/server.log" 2>&1 &
		SERVER_PID=$!
		for _ in $(seq 1 100); do curl -s -o /dev/null "$URL/" && break; sleep 0.1; done
		if [ ! -f "$BENCH_DIR/s3rver.uploaded-$FILES-$SHARDS" ]; then
			echo "uploading the datasets to s3rver ..."
			rclone copy --transfers 8 "$ROOT/bucket" "$(rclone_remote)" >"$WORK/upload.log" 2>&1 ||
				{ cat "$WORK/upload.log" >&2; exit 1; }
			touch "$BENCH_DIR/s3rver.uploaded-$FILES-$SHARDS"
		fi
	else
		SERVER="fake_s3.py, ${1} ms a request"
		rm -f "$WORK/port"
		python3 tests/mount/fake_s3.py --root "$ROOT" --port "$port" --port-file "$WORK/port" \
			--latency "$1" 2>"$WORK/server.log" &
		SERVER_PID=$!
		until [ -s "$WORK/port" ]; do sleep 0.05; done
		# ETags are computed on first sight: one untimed flat listing.
		python3 - "$URL" <<'PY' >/dev/null
import re, sys, urllib.parse, urllib.request
url, token = sys.argv[1], ""
while True:
    q = {"list-type": "2"}
    if token: q["continuation-token"] = token
    body = urllib.request.urlopen(url + "/bucket?" + urllib.parse.urlencode(q)).read().decode()
    m = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
    if not m: break
    token = m.group(1)
PY
	fi
}

# ---- the mounts ------------------------------------------------------------
# Each runs in the foreground, in the background of this script: PID is its
# process, and lib.sh's cleanup (or unmount_peer) unmounts MNT and waits.
unmount_peer() {
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	if [ -n "$PID" ]; then
		for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	PID=
	rm -rf "$WORK/cache"
}
trap 'unmount_peer; stop_server; cleanup' EXIT

mount_peer() {   # mount_peer SYSTEM DATASET
	local system=$1 dataset=$2 i
	rm -rf "$WORK/cache"
	mkdir -p "$WORK/cache"
	case $system in
	dlcache*)
		local opts="cache_dir=$WORK/cache,log_level=warning,s3_endpoint=$URL"
		[ "$dataset" = shards ] && opts+=",cache_max_file=8M"
		opts+=${DLCACHE_OPTS:+,$DLCACHE_OPTS}
		"$DLCACHE" mount "s3://bucket/$dataset" "$MNT" -f -o "$opts" >>"$WORK/peer.log" 2>&1 &
		PID=$!
		;;
	s3fs)
		printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$WORK/passwd"
		chmod 600 "$WORK/passwd"
		s3fs "bucket:/$dataset" "$MNT" -f -o "url=$URL,use_path_request_style,passwd_file=$WORK/passwd" \
			-o "use_cache=$WORK/cache,max_stat_cache_size=1000000,stat_cache_expire=86400,enable_noobj_cache,ro" \
			>>"$WORK/peer.log" 2>&1 &
		PID=$!
		;;
	rclone)
		rclone mount "$(rclone_remote)/$dataset" "$MNT" --read-only --vfs-cache-mode full \
			--cache-dir "$WORK/cache" --vfs-cache-max-size 100G --dir-cache-time 1000h \
			--use-server-modtime >>"$WORK/peer.log" 2>&1 &
		PID=$!
		;;
	esac
	for i in $(seq 1 1200); do
		mountpoint -q "$MNT" && [ -n "$(ls "$MNT" 2>/dev/null)" ] && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.05
	done
	tail -n 20 "$WORK/peer.log" >&2
	echo "peers.sh: $system did not mount s3://bucket/$dataset from $URL" >&2
	exit 1
}

# ---- one round: every system, epochs 1-3 -----------------------------------
declare -A mins
keep() { if [ -z "${mins[$1]:-}" ] || awk "BEGIN {exit !($2 < ${mins[$1]})}"; then mins[$1]=$2; fi; }

orders() {   # orders DATASET: $WORK/order.DATASET.E for epochs 1-3 (the same for all)
	python3 - "$ROOT/bucket/$1" "$WORK/order.$1" <<'PY'
import os, random, sys
root, out = sys.argv[1], sys.argv[2]
paths = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
for epoch in (1, 2, 3):
    order = list(paths)
    random.Random(epoch).shuffle(order)
    with open("%s.%d" % (out, epoch), "w") as f:
        f.write("\n".join(order) + "\n")
PY
}

round() {   # round LATENCY DATASET RUN
	local latency=$1 dataset=$2 run=$3 system epoch t0 mounted out mode expect
	mode=small
	[ "$dataset" = shards ] && mode=tar
	for system in $SYSTEMS; do
		t0=$(now)
		mount_peer "$system" "$dataset"
		mounted=$(since "$t0")
		keep "$latency/$dataset/$system/mount" "$mounted"
		line="  run $run $system: mount ${mounted} s"
		for epoch in 1 2 3; do
			drop_caches
			local control=
			if [ "$system" = dlcache+announce ]; then
				echo "epoch $epoch" >"$MNT/.control"
				control=$MNT/.control
			fi
			out=$(timeout "$EPOCH_TIMEOUT" python3 tests/bench/peers_read.py "$MNT" \
				"$WORK/order.$dataset.$epoch" "$READERS" "$mode" $control) ||
				{ tail -n 20 "$WORK/peer.log" >&2; echo "peers.sh: $system failed epoch $epoch" >&2; exit 1; }
			set -- $out
			expect=${expected[$dataset]}
			[ "$2" = "$expect" ] || { echo "peers.sh: $system read $2 bytes of $dataset, not $expect" >&2; exit 1; }
			keep "$latency/$dataset/$system/$epoch" "$1"
			line+=", epoch $epoch ${1} s"
		done
		echo "$line"
		unmount_peer
	done
}

declare -A expected
expected[small]=$(find "$ROOT/bucket/small" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
expected[shards]=$(python3 - "$ROOT/bucket/shards" <<'PY'
import os, sys, tarfile
root = sys.argv[1]
print(sum(m.size for f in os.listdir(root) for m in tarfile.open(os.path.join(root, f)) if m.isfile()))
PY
)

case $WHICH in
all) DATASETS="small shards" ;;
small|shards) DATASETS=$WHICH ;;
*) echo "usage: peers.sh [small|shards|all]" >&2; exit 2 ;;
esac

echo "peers: $(s3fs --version 2>&1 | head -n 1 | sed 's/ (commit.*//'); $(rclone version 2>&1 | head -n 1);" \
	"dlcache $("$DLCACHE" --version 2>&1 | head -n 1)"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); $READERS readers, $RUNS rounds"
for dataset in $DATASETS; do orders "$dataset"; done
for latency in $LATENCIES; do
	start_server "$latency"
	for dataset in $DATASETS; do
		echo "== $dataset, $SERVER"
		for run in $(seq 1 "$RUNS"); do round "$latency" "$dataset" "$run"; done
		base=$latency/$dataset/dlcache
		printf '| %s, %s | mount | epoch 1 | epoch 2 | epoch 3 | epoch 1 vs dlcache | epoch 2 vs dlcache | epoch 3 vs dlcache |\n' "$dataset" "$SERVER"
		echo '|---|---|---|---|---|---|---|---|'
		for system in $SYSTEMS; do
			k=$latency/$dataset/$system
			printf '| %s | %s s | %s s | %s s | %s s | %sx | %sx | %sx |\n' "$system" "${mins[$k/mount]}" \
				"${mins[$k/1]}" "${mins[$k/2]}" "${mins[$k/3]}" \
				"$(ratio "${mins[$k/1]}" "${mins[$base/1]}")" "$(ratio "${mins[$k/2]}" "${mins[$base/2]}")" \
				"$(ratio "${mins[$k/3]}" "${mins[$base/3]}")"
		done
	done
	stop_server
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
