#!/usr/bin/env bash
# pip install ./python works offline, as the README says: in a fresh venv
# of Debian's python3 made with --system-site-packages (so that setuptools
# and wheel, Debian's python3-setuptools and python3-wheel, serve as the
# build backend without PyPI), `pip install --no-build-isolation ./python`
# installs the dlcache package into the venv; its python then imports it
# from there (not from the source tree), with its typing marker, and
# `pip uninstall` takes it out again.
set -euo pipefail
: "${SRCDIR:?SRCDIR must name the source tree}"
WORK=$(mktemp -d /tmp/dlcache-pip.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap "exit 143" INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

PY=/usr/bin/python3
"$PY" -c 'import venv, setuptools, wheel' 2>/dev/null ||
	{ echo "SKIP: Debian's python3-venv, python3-setuptools or python3-wheel is missing"; exit 77; }
unset PYTHONPATH
# pip builds in the tree it is given: a copy keeps the source clean.
cp -r "$SRCDIR/python" "$WORK/python"
"$PY" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install --no-build-isolation --no-index "$WORK/python" >"$WORK/pip.log" 2>&1 ||
	fail "pip install --no-build-isolation ./python failed: $(tail -n 5 "$WORK/pip.log")"
cd "$WORK"
where=$("$WORK/venv/bin/python" -c 'import dlcache; print(dlcache.__file__)')
case $where in
"$WORK/venv/lib/"*/site-packages/dlcache/__init__.py) ;;
*) fail "the venv's python imports dlcache from $where, not from the venv" ;;
esac
"$WORK/venv/bin/python" - <<'PY' || fail "the installed package lacks its API or its typing marker"
import importlib.resources, dlcache
for name in dlcache.__all__:
    getattr(dlcache, name)
assert importlib.resources.files("dlcache").joinpath("py.typed").is_file()
m = dlcache.ShuffleSampler(["a", "b", "c"], seed=1)
assert sorted(m) == [0, 1, 2]
PY
"$WORK/venv/bin/pip" uninstall -y dlcache >/dev/null
! "$WORK/venv/bin/python" -c 'import dlcache' 2>/dev/null || fail "dlcache is still importable after pip uninstall"
echo "ok pip install: $where"
