#!/usr/bin/env bash
# The house layout (DESIGN.md, "Layers"), the part the build cannot hold.
#
# The build holds the layer rule itself (meson.build): each folder of src/ is
# a static library compiled with only the public headers of its own layer and
# the layers below (include/LAYER/dlcache/*.h), and a program per layer links
# every object of the layer against the lower layers only, so an upward
# include fails to compile and an upward call fails to link.  What is left
# for this script:
#   - every .c but main.c lives in a layer folder, and every folder of src/ is
#     a layer that meson.build names (so none escapes the libraries);
#   - a public header lives in the include folder of the layer whose module
#     implements it (include/L/dlcache/X.h with src/L/X.c), whatever its name;
#   - no file reaches into another folder's private headers ("../x/y.h");
#   - no two files of a folder call each other in a loop (read from the
#     symbols of the built objects: a loop is one concern cut in two, or two
#     concerns sharing state that belongs to a third).  This is the rule that
#     keeps files short: a file holds one concern, and a concern cut in two
#     by size shows up here as a loop.  KNOWN_LOOPS, the loops there were
#     when the check came, is empty: every loop fails.
# Before it reads the build, the script proves its loop check on crafted
# objects (three that call round in a loop, a fourth that calls down into
# them): a loop check that could not fail would pass every tree.
#
#     SRCDIR=. BUILDDIR=build tests/layers.sh
#     SRCDIR=. tests/layers.sh --self-test     # only the proof
set -euo pipefail
: "${SRCDIR:?SRCDIR must name the source tree}"
self_test_only=false
[ "${1:-}" = --self-test ] && self_test_only=true
$self_test_only || : "${BUILDDIR:?BUILDDIR must name the build tree (the layer libraries)}"
cd "$SRCDIR"
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# The loops between the files of each folder of a build: one line
# "LAYER: FILE FILE..." per strongly connected set of two or more files,
# read from the objects' defined (T, D, B, R) and undefined (U) symbols in
# BUILD/libdlcache_LAYER.a.p/src_LAYER_FILE.c.o; "MISSING DIR" for a layer
# not built.  Usage: find_loops BUILD LAYER...
find_loops() {
	local build=$1 l dir o m
	shift
	for l in "$@"; do
		dir="$build/libdlcache_$l.a.p"
		[ -d "$dir" ] || { echo "MISSING $dir"; continue; }
		for o in "$dir"/*.o; do
			m=${o##*/}; m=${m%.c.o}; m=${m#src_"${l}"_}
			nm "$o" | awk -v l="$l" -v m="$m" '$1 == "U" { print l, m, "U", $2 }
				$2 ~ /^[TDBR]$/ { print l, m, "D", $3 }'
		done
	done | python3 -c '
import sys, collections
defs, uses = {}, collections.defaultdict(set)
for line in sys.stdin:
    if line.startswith("MISSING"):
        print(line.strip()); continue
    layer, mod, kind, sym = line.split()
    if kind == "D": defs[(layer, sym)] = mod
    else: uses[(layer, mod)].add(sym)
edges = collections.defaultdict(set)
for (layer, mod), syms in uses.items():
    for s in syms:
        owner = defs.get((layer, s))
        if owner and owner != mod: edges[(layer, mod)].add((layer, owner))
# Tarjan, small graphs.
index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index: visit(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            out.append("%s: %s" % (v[0], " ".join(sorted(m for _, m in comp))))
for v in list(edges):
    if v not in index: visit(v)
print("\n".join(sorted(out)))
'
}

# The proof: layer "probe" of a crafted build, where ping.c and pong.c call
# each other (through a third file, so a longer loop is caught too) and
# top.c calls down into them only.  find_loops must name exactly that loop.
self_test() {
	local tmp dir got want="probe: ping pong relay"
	tmp=$(mktemp -d)
	dir="$tmp/libdlcache_probe.a.p"
	mkdir "$dir"
	printf 'void pong(void);\nvoid ping(void) { pong(); }\n' >"$tmp/ping.c"
	printf 'void relay(void);\nvoid pong(void) { relay(); }\n' >"$tmp/pong.c"
	printf 'void ping(void);\nvoid relay(void) { ping(); }\n' >"$tmp/relay.c"
	printf 'void ping(void);\nvoid top(void) { ping(); }\n' >"$tmp/top.c"
	for f in ping pong relay top; do
		"${CC:-cc}" -c -o "$dir/src_probe_$f.c.o" "$tmp/$f.c" ||
			{ rm -rf "$tmp"; fail "cannot compile the self-test's objects (CC=${CC:-cc})"; return; }
	done
	got=$(find_loops "$tmp" probe)
	rm -rf "$tmp"
	[ "$got" = "$want" ] ||
		fail "the loop check is broken: on a crafted loop it found \"$got\", not \"$want\""
}
self_test
if $self_test_only; then
	[ $status -eq 0 ] && echo "ok layers self-test: a crafted loop of three files is found, a file calling down is not in it"
	exit $status
fi

# The layers, lowest first, as meson.build lists them.
read -r -a layers <<<"$(sed -n "s/^layer_names = \[\(.*\)\]/\1/p" meson.build | tr -d "',")"
[ ${#layers[@]} -gt 0 ] || { echo "FAIL: meson.build has no layer_names list" >&2; exit 1; }
declare -A is_layer
for l in "${layers[@]}"; do is_layer[$l]=1; done

for f in src/*.c; do
	[ "$f" = src/main.c ] || fail "$f is at the top of src/; only main.c belongs there"
done
for d in src/*/; do
	d=${d%/}; d=${d#src/}
	[ -n "${is_layer[$d]:-}" ] || fail "src/$d is not in meson.build's layer_names (add it there and to DESIGN.md)"
done

# Public headers: include/LAYER/dlcache/NAME.h, implemented by src/LAYER/NAME.c.
for h in include/*; do
	[ -d "$h" ] || { fail "$h: public headers live in include/LAYER/dlcache/"; continue; }
	l=${h#include/}
	[ -n "${is_layer[$l]:-}" ] || fail "$h is not the include folder of a layer"
done
headers=0
for h in include/*/dlcache/*.h; do
	[ -e "$h" ] || continue
	l=${h#include/}; l=${l%%/*}
	name=${h##*/}; name=${name%.h}
	[ -f "src/$l/$name.c" ] || fail "$h has no module src/$l/$name.c (a public header lives in its module's layer)"
	headers=$((headers + 1))
done

# Private headers stay in their folder.
while IFS= read -r hit; do
	fail "private header reached from another folder: $hit"
done < <(grep -rnE '^#include "[^"]*/' src include | grep -vE '#include "dlcache/[A-Za-z0-9_]+\.h"' || true)

# Loops between the files of a folder (a new one fails; one listed that is
# cut must leave the list).
KNOWN_LOOPS=""
loops=$(find_loops "$BUILDDIR" "${layers[@]}")
while IFS= read -r loop; do
	[ -n "$loop" ] || continue
	case $loop in
	MISSING*) fail "${loop#MISSING } is not built: build first (tests/build.sh)" ;;
	*) grep -qxF "$loop" <<<"$KNOWN_LOOPS" ||
		fail "files of one folder call each other in a loop: $loop (move the shared concern out whole)" ;;
	esac
done <<<"$loops"
while IFS= read -r known; do
	[ -n "$known" ] || continue
	grep -qxF "$known" <<<"$loops" ||
		fail "the loop \"$known\" is cut: remove it from KNOWN_LOOPS in tests/layers.sh"
done <<<"$KNOWN_LOOPS"

[ $status -eq 0 ] && echo "ok layers: ${layers[*]} (the build checks includes and calls); $headers public headers in their layer; no loop between the files of a folder"
exit $status
