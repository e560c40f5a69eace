#!/usr/bin/env bash
# The house layout (DESIGN.md, "Layers"): every .c but main.c lives in a layer
# folder of src/, a folder uses only the folders below it, and no source file
# reaches 40 KB.  A header of include/dlcache/ belongs to the folder of the
# module that implements it (X.h: the folder holding X.c); a file's layer is
# its folder's, and each "dlcache/X.h" it includes must be of its layer or a
# lower one.
set -euo pipefail
: "${SRCDIR:?SRCDIR must name the source tree}"
cd "$SRCDIR"
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# Lowest first.  Keep in step with meson.build's lists and DESIGN.md.
layers=(base source namespace cache read fuse tools config)
declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done
rank[main]=${#layers[@]}

for f in src/*.c; do
	[ "$f" = src/main.c ] || fail "$f is at the top of src/; only main.c belongs there"
done
for d in src/*/; do
	d=${d%/}; d=${d#src/}
	[ -n "${rank[$d]:-}" ] || fail "src/$d is not a layer of tests/layers.sh (add it there and to DESIGN.md)"
done

# The folder of the module that implements a public header.
folder_of_header() {
	local name=$1 hit
	hit=$(ls src/*/"$name".c 2>/dev/null | head -n1)
	[ -n "$hit" ] || { echo ""; return; }
	hit=${hit#src/}; echo "${hit%%/*}"
}

check_file() {   # FILE LAYER
	local file=$1 layer=$2 inc owner
	for inc in $(sed -n 's/^#include "dlcache\/\([a-z_]*\)\.h".*/\1/p' "$file"); do
		owner=$(folder_of_header "$inc")
		if [ -z "$owner" ]; then
			fail "$file includes dlcache/$inc.h, which no module of src/ implements"
		elif [ "${rank[$owner]}" -gt "${rank[$layer]}" ]; then
			fail "$file (layer $layer) includes dlcache/$inc.h of the higher layer $owner"
		fi
	done
}

checked=0
for f in src/*/*.[ch]; do
	layer=${f#src/}; layer=${layer%%/*}
	check_file "$f" "$layer"
	checked=$((checked + 1))
done
for h in include/dlcache/*.h; do
	name=${h##*/}; name=${name%.h}
	layer=$(folder_of_header "$name")
	[ -n "$layer" ] || { fail "$h has no module in src/"; continue; }
	check_file "$h" "$layer"
	checked=$((checked + 1))
done
check_file src/main.c main

for f in src/main.c src/*/*.[ch]; do
	size=$(stat -c %s "$f")
	[ "$size" -lt 40960 ] || fail "$f is $size bytes; split it by concern (the house keeps files under 40 KB)"
done
[ $status -eq 0 ] && echo "ok layers: $checked files use only their own layer or lower ones (${layers[*]}), all under 40 KB"
exit $status
