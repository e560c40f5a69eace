#!/usr/bin/env bash
# The manual pages render without a warning, mount.dlcache(8) documents every
# option that `dlcache mount --help` lists, and dlcache(1) every subcommand.
set -euo pipefail
: "${DLCACHE:?DLCACHE must name the dlcache binary}" "${SRCDIR:?SRCDIR must name the source tree}"
command -v man >/dev/null || { echo "SKIP: man is missing"; exit 77; }
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

for page in "$SRCDIR"/man/*.[1-8]; do
	warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null || true)
	[ -z "$warnings" ] || fail "${page##*/} renders with warnings: $warnings"
	echo "ok ${page##*/} renders without warnings"
done

options=$("$DLCACHE" mount --help 2>&1 | sed -n 's/^    \([a-z_][a-z_]*\)\([= ].*\)\?$/\1/p')
[ -n "$options" ] || fail "dlcache mount --help lists no options"
for o in $options; do
	grep -Eq "^\.BI? $o(=| |$)" "$SRCDIR/man/mount.dlcache.8" ||
		fail "mount.dlcache(8) does not document the option $o"
done
echo "ok mount.dlcache.8 documents $(echo $options | wc -w) options"

commands=$("$DLCACHE" --help 2>&1 | sed -n 's/^\(usage:\)\? *dlcache \([a-z][a-z]*\) .*/\2/p')
for c in $commands; do
	grep -Eq "^\.BI? \"dlcache $c[ \"]" "$SRCDIR/man/dlcache.1" ||
		fail "dlcache(1) does not document the subcommand $c"
done
[ -n "$commands" ] || fail "dlcache --help lists no subcommands"
echo "ok dlcache.1 documents: $(echo $commands)"
exit $status
