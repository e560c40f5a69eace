# common.sh - sourced by build-deb.sh and build-rpm.sh: $top (the source
# tree), $out (the output directory, $1 or .), $version (from meson.build),
# $work (a temporary directory removed on exit), and copy_tree DEST, which
# copies the tree's files (tracked and untracked, not ignored) into DEST.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)
version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$top/meson.build")
work=$(mktemp -d "/tmp/dlcache-$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$work"' EXIT
trap "exit 143" INT TERM

copy_tree() {
	mkdir -p "$1"
	(cd "$top" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$1")
}
