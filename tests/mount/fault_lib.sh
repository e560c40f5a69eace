# fault_lib.sh - shared by the fault, security and stress mount tests, after
# lib.sh: readers that report what they got, and waits that are bounded and
# say where the daemon was stuck when they run out.

# read_status REL [CHUNK]: reads $MNT/REL whole (CHUNK bytes per read(2)) and
# compares it with $SRC/REL; prints "ok", "wrong" or the errno name of the
# failed call (EIO, ENOTCONN, ...).
read_status() {
	python3 - "$MNT/$1" "$SRC/$1" "${2:-1048576}" <<'PY'
import errno, os, sys
mounted, source, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    fd = os.open(mounted, os.O_RDONLY)
    try:
        parts = []
        while True:
            b = os.read(fd, chunk)
            if not b:
                break
            parts.append(b)
    finally:
        os.close(fd)
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
    sys.exit(0)
print("ok" if b"".join(parts) == open(source, "rb").read() else "wrong")
PY
}

# dump_stacks PID: every thread's kernel stack, and user stacks when gdb is
# there; for the failure message of a wait that ran out.
dump_stacks() {
	local pid=$1
	echo "--- threads of $pid ---" >&2
	ps -L -o tid,stat,wchan:32,comm -p "$pid" >&2 2>/dev/null || true
	cat /proc/"$pid"/task/*/stack 2>/dev/null | sort | uniq -c | sort -rn | head -n 30 >&2 || true
	if command -v gdb >/dev/null; then
		timeout 30 gdb -p "$pid" -batch -ex 'thread apply all bt' 2>/dev/null |
			grep -E '^(Thread|#)' | head -n 120 >&2 || true
	fi
}

# wait_gone PID SECONDS WHAT: waits until PID has exited; fails with the
# daemon's stacks when it is still there after SECONDS.
wait_gone() {
	local pid=$1 limit=$2 what=$3 i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	[ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null && dump_stacks "$DAEMON_PID"
	fail "$what still running after $limit s"
}

# expect_daemon_exit SECONDS STATUS: the daemon exits within SECONDS with
# STATUS; it is then forgotten.
expect_daemon_exit() {
	local rc=0
	wait_gone "$DAEMON_PID" "$1" "the daemon"
	wait "$DAEMON_PID" 2>/dev/null || rc=$?
	DAEMON_PID=
	expect_eq "daemon exit status" "$rc" "$2"
}

# open_fds: descriptors the daemon holds now, less those libfuse keeps per
# worker thread: its clone of /dev/fuse, and the pipe it makes on the
# thread's first spliced reply (a hit on a cache file) and keeps for reuse.
open_fds() {
	local fd n=0 target
	for fd in /proc/"$DAEMON_PID"/fd/*; do
		target=$(readlink "$fd") || continue
		[ "$target" = /dev/fuse ] || [[ "$target" == pipe:* ]] || n=$((n + 1))
	done
	echo "$n"
}

# read_status_within SECONDS REL [CHUNK]: read_status, failing with the
# daemon's stacks when the read has not ended after SECONDS.
read_status_within() {
	local out=$WORK/read_status.out pid
	read_status "$2" "${3:-1048576}" >"$out" &
	pid=$!
	wait_gone "$pid" "$1" "reading $2"
	wait "$pid" || true
	cat "$out"
}

# wait_stat KEY VALUE SECONDS: waits until the .stats member KEY reaches
# VALUE (a number), so that a test acts once the daemon is where it wants it.
wait_stat() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(stat_value "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "$1 did not reach $2 in $3 s: $(stat_value "$1")"
}
