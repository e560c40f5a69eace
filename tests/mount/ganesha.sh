# ganesha.sh - sourced by NFS mount tests and benchmarks after their own
# lib.sh: a private nfs-ganesha (VFS backend) serving one directory over
# NFSv4 only, on 127.0.0.1 and a free port, as a plain process: no rpcbind,
# no kernel NFS support, nothing written outside $WORK.
#
#   start_ganesha DIR [EXPORT LINES] [NFSV4 LINES]
#                                      serve DIR as /export; waits until ready
#   stop_ganesha                       SIGTERM to its PID, wait until it is gone
#   ganesha_running                    true while it runs
#   NFS_SOURCE                         nfs://127.0.0.1/export?version=4&nfsport=PORT
#
# The server started here is stopped by its PID on exit, even after a failure
# (CLEANUP_HOOKS in tests/mount/lib.sh, or the caller's own trap).

command -v ganesha.nfsd >/dev/null || { echo "SKIP: ganesha.nfsd is missing (apt-get install nfs-ganesha nfs-ganesha-vfs)"; exit 77; }
GANESHA_PLUGINS=$(dirname "$(dpkg -L nfs-ganesha-vfs 2>/dev/null | grep '/libfsalvfs\.so$' | head -n 1)")
[ "$GANESHA_PLUGINS" != . ] || { echo "SKIP: nfs-ganesha-vfs is missing"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: nfs-ganesha's VFS backend needs root"; exit 77; }

GANESHA_DIR=$WORK/ganesha
GANESHA_PID=
GANESHA_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
NFS_SOURCE="nfs://127.0.0.1/export?version=4&nfsport=$GANESHA_PORT"
mkdir -p "$GANESHA_DIR/recovery"

ganesha_running() {
	[ -n "$GANESHA_PID" ] && kill -0 "$GANESHA_PID" 2>/dev/null
}

start_ganesha() {
	local dir=$1 extra=${2:-} nfsv4_extra=${3:-}
	cat >"$GANESHA_DIR/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	Bind_addr = 127.0.0.1;
	NFS_Port = $GANESHA_PORT;
	Protocols = 4;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
	Plugins_Dir = "$GANESHA_PLUGINS";
}
NFS_KRB5 {
	Active_krb5 = false;
}
NFSv4 {
	Graceless = true;
	RecoveryBackend = fs;
	RecoveryRoot = "$GANESHA_DIR/recovery";
	Only_Numeric_Owners = true;
	$nfsv4_extra
}
EXPORT {
	Export_Id = 1;
	Path = "$dir";
	Pseudo = /export;
	Access_Type = RO;
	Squash = No_Root_Squash;
	SecType = sys;
	Protocols = 4;
	Transports = TCP;
	Attr_Expiration_Time = 0;
	$extra
	FSAL {
		Name = VFS;
	}
}
EOF
	: >"$GANESHA_DIR/ganesha.log"
	ganesha.nfsd -F -f "$GANESHA_DIR/ganesha.conf" -L "$GANESHA_DIR/ganesha.log" \
		-p "$GANESHA_DIR/ganesha.pid" -N NIV_EVENT &
	GANESHA_PID=$!
	for _ in $(seq 1 200); do
		grep -q 'NFS SERVER INITIALIZED' "$GANESHA_DIR/ganesha.log" && return 0
		ganesha_running || break
		sleep 0.05
	done
	echo "--- ganesha log ---" >&2
	tail -n 20 "$GANESHA_DIR/ganesha.log" >&2
	stop_ganesha
	echo "FAIL: nfs-ganesha did not start" >&2
	exit 1
}

stop_ganesha() {
	ganesha_running || { GANESHA_PID=; return 0; }
	kill "$GANESHA_PID" 2>/dev/null || true
	for _ in $(seq 1 100); do
		ganesha_running || break
		sleep 0.05
	done
	ganesha_running && kill -9 "$GANESHA_PID" 2>/dev/null
	wait "$GANESHA_PID" 2>/dev/null || true
	GANESHA_PID=
}

CLEANUP_HOOKS+=(stop_ganesha)
