# s3_lib.sh - sourced by the S3 mount tests and benchmarks after their own
# lib.sh: a fake S3 server (fake_s3.py, Python's standard library) on
# 127.0.0.1, started and stopped by its PID.
#
#   start_fake_s3 ROOT [ARGS...]   serve ROOT/BUCKET/KEY; waits until it listens
#                                   (FAKE_S3_PORT kept across restarts)
#   stop_fake_s3                    SIGTERM to its PID, wait until it is gone
#   fake_s3 VERB PATH               an admin request (/_fake/...), prints the answer
#   fake_s3_count KIND              LIST, GET or HEAD requests since the last clear
#   FAKE_S3_URL                     http://127.0.0.1:PORT
#
# The server is stopped on exit, even after a failure (CLEANUP_HOOKS).

FAKE_S3_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/fake_s3.py
FAKE_S3_PID=
FAKE_S3_PORT=
FAKE_S3_URL=

start_fake_s3() {
	local root=$1
	shift
	local portfile=$WORK/fake_s3.port
	rm -f "$portfile"
	python3 "$FAKE_S3_PY" --root "$root" --port "${FAKE_S3_PORT:-0}" --port-file "$portfile" "$@" \
		2>>"$WORK/fake_s3.log" &
	FAKE_S3_PID=$!
	for _ in $(seq 1 200); do
		if [ -s "$portfile" ]; then
			FAKE_S3_PORT=$(cat "$portfile")
			FAKE_S3_URL=http://127.0.0.1:$FAKE_S3_PORT
			return 0
		fi
		kill -0 "$FAKE_S3_PID" 2>/dev/null || break
		sleep 0.05
	done
	cat "$WORK/fake_s3.log" >&2 || true
	echo "FAIL: the fake S3 server did not start" >&2
	exit 1
}

stop_fake_s3() {
	if [ -n "$FAKE_S3_PID" ] && kill -0 "$FAKE_S3_PID" 2>/dev/null; then
		kill "$FAKE_S3_PID" 2>/dev/null || true
		wait "$FAKE_S3_PID" 2>/dev/null || true
	fi
	FAKE_S3_PID=
}
CLEANUP_HOOKS+=(stop_fake_s3)

fake_s3() {   # fake_s3 GET|POST /_fake/...
	curl -sf -X "$1" "$FAKE_S3_URL$2"
}

fake_s3_count() {
	fake_s3 GET /_fake/stats | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
