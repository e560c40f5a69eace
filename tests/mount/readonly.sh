#!/usr/bin/env bash
# Every mutation of the dataset fails with EROFS, and nothing changes.
. "$(dirname "$0")/lib.sh"

make_dataset "$SRC" 2 5 1000
ln -s train "$SRC/link"

test_every_mutation_fails_with_erofs() {
	start_daemon
	local before
	before=$(cd "$SRC" && find . -printf '%p %s %m %T@\n' | sort)
	python3 - "$MNT" <<'PY' || fail "EROFS checks"
import errno, os, sys
m = sys.argv[1]
f = m + "/train/n00000000/n00000000_0.JPEG"
d = m + "/train/n00000000"
cases = {
    "open for writing": lambda: os.open(f, os.O_WRONLY),
    "open read-write": lambda: os.open(f, os.O_RDWR),
    "open with O_TRUNC": lambda: os.open(f, os.O_RDONLY | os.O_TRUNC),
    "create": lambda: os.open(d + "/new", os.O_WRONLY | os.O_CREAT, 0o644),
    "mknod (fifo)": lambda: os.mkfifo(d + "/fifo"),
    "mkdir": lambda: os.mkdir(d + "/sub"),
    "unlink": lambda: os.unlink(f),
    "rmdir": lambda: os.rmdir(d),
    "rename": lambda: os.rename(f, f + ".x"),
    "link": lambda: os.link(f, d + "/hard"),
    "symlink": lambda: os.symlink("x", d + "/sym"),
    "chmod": lambda: os.chmod(f, 0o777),
    "chown": lambda: os.chown(f, 1, 1),
    "truncate": lambda: os.truncate(f, 0),
    "utime": lambda: os.utime(f, (0, 0)),
    "setxattr": lambda: os.setxattr(f, "user.x", b"1"),
    "removexattr": lambda: os.removexattr(f, "user.x"),
    "rename into place": lambda: os.rename(m + "/link", m + "/link2"),
}
failed = []
for name, op in cases.items():
    try:
        op()
        failed.append(name + ": succeeded")
    except OSError as e:
        if e.errno != errno.EROFS:
            failed.append("%s: %s instead of EROFS" % (name, errno.errorcode.get(e.errno, e.errno)))
if failed:
    sys.exit("\n".join(failed))
print("%d mutations refused with EROFS" % len(cases))
PY
	[ "$before" = "$(cd "$SRC" && find . -printf '%p %s %m %T@\n' | sort)" ] || fail "the source changed"
	[ ! -e "$MNT/train/n00000000/new" ] || fail "a created file appeared"
}

run_tests
