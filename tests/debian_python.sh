# debian_python.sh - sourced by tests/mount/lib.sh and tests/bench/lib.sh.
#
# debian_python_first DIR: puts Debian's python3 (tests/run.sh installs it)
# first in PATH, through a symlink in DIR, whatever PATH found first: a
# version manager's shim (pyenv's is a bash script that execs its own
# Python) costs 0.4 s a start against 0.06, and the mount suites start
# Python thousands of times.  A symlink in PATH, not a shell function, so
# that background jobs ($!) and commands like timeout find it too.
debian_python_first() {
	[ -x /usr/bin/python3 ] || return 0
	mkdir -p "$1"
	ln -sf /usr/bin/python3 "$1/python3"
	PATH=$1:$PATH
}

# dlcache_package_first TOP: the dlcache package of the source tree TOP
# (TOP/python) first in PYTHONPATH, ahead of an installed python3-dlcache
# or pip install, so that the suites and benchmarks use the tree's package.
dlcache_package_first() {
	PYTHONPATH=$1/python${PYTHONPATH:+:$PYTHONPATH}
	export PYTHONPATH
}
