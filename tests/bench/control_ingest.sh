#!/usr/bin/env bash
# tests/bench/control_ingest.sh [ENTRIES] - how fast a mount takes a full
# epoch of loss ranks: ENTRIES "SCORE PATH" lines (default 1,281,167, one per
# ImageNet training image) written to MOUNT/.control, side by side with the
# same bytes written to /dev/null.  Needs root and /dev/fuse; the tree of
# empty files is built once in /var/tmp and reused.
. "$(dirname "$0")/lib.sh"
ENTRIES=${1:-1281167}
BENCH_DIR=${BENCH_DIR:-/var/tmp/dlcache-bench-meta-$ENTRIES}
SRC=$BENCH_DIR/src
empty_tree "$BENCH_DIR" "$ENTRIES"

# One rank line per file, in a random order, as a job would write after an epoch.
(cd "$SRC" && find train -type f) | python3 -c '
import random, sys
paths = sys.stdin.read().split()
random.shuffle(paths)
sys.stdout.write("".join("%.6f %s\n" % (random.random(), p) for p in paths))' >"$WORK/ranks.txt"
lines=$(wc -l <"$WORK/ranks.txt")
bytes=$(stat -c %s "$WORK/ranks.txt")

mount_dlcache "$SRC"
cat "$WORK/ranks.txt" >/dev/null
t0=$(now); cat "$WORK/ranks.txt" >/dev/null; null_s=$(since "$t0")
t0=$(now); cat "$WORK/ranks.txt" >"$MNT/.control"; mount_s=$(since "$t0")
t0=$(now); dd if="$WORK/ranks.txt" of="$MNT/.control" bs=1M status=none; dd_s=$(since "$t0")

cat <<TXT
lines                          $lines ($((bytes / 1048576)) MiB)
cat ranks > MNT/.control       ${mount_s}s = $(awk "BEGIN {printf \"%.2f\", $lines / $mount_s / 1e6}") M lines/s (the first write builds the path index)
dd bs=1M ranks > MNT/.control  ${dd_s}s = $(awk "BEGIN {printf \"%.2f\", $lines / $dd_s / 1e6}") M lines/s
cat ranks > /dev/null          ${null_s}s
scored samples                 $(stat_of scored_samples) (errors $(stat_of control_errors))
TXT
