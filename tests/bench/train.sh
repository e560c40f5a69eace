#!/usr/bin/env bash
# train.sh - training over the emulated slow source (examples/train.py: a
# small CNN on a synthetic ImageFolder, 2 DataLoader workers): per-epoch time,
# validation accuracy and hit ratio with no cache, dlcache freeze, lru,
# importance, and importance with the cache-aware sampler, at caches holding
# 10% and 30% of the training files.  Prefetch is off in every run, so the
# times show what the cache itself saves; the page cache is emptied before
# each epoch (a dataset far larger than RAM).
#
#   tests/bench/train.sh [PER_CLASS] [DELAY]    (defaults: 100, 5ms)
#   ONLY=cache-aware tests/bench/train.sh        (the rows whose name matches)
. "$(dirname "$0")/lib.sh"
PER_CLASS=${1:-100}
DELAY=${2:-5ms}
EPOCHS=3
DATA=/var/tmp/dlcache-bench-train-$PER_CLASS
if [ ! -f "$DATA/complete" ]; then
	rm -rf "$DATA"
	/usr/bin/python3 examples/make_dataset.py "$DATA/src" --per-class "$PER_CLASS" >/dev/null
	touch "$DATA/complete"
fi
# What the store charges for the training files: whole 4 KiB blocks.
CHARGED=$(find "$DATA/src/train" -type f -printf '%s\n' |
	awk '{b += int(($1 + 4095) / 4096) * 4096} END {print b}')
NTRAIN=$(find "$DATA/src/train" -type f | wc -l)
echo "dataset: $NTRAIN training files ($CHARGED bytes charged), source: ${DELAY} per call, 3 calls per miss"

# run NAME POLICY FRACTION SAMPLER [AGGRESSIVENESS]
run() {
	[[ "$1" =~ ${ONLY:-.} ]] || [ "$1" = no-cache ] || return 0
	local size=$(awk "BEGIN {printf \"%d\", $CHARGED * $3}")
	[ "$size" -gt 0 ] || size=1M   # policy=none keeps nothing; any size will do
	rm -rf "$WORK/cache"
	mount_dlcache "$DATA/src" "policy=$2,cache_size=$size,source_delay=$DELAY"
	/usr/bin/python3 examples/train.py --data "$MNT" --epochs $EPOCHS --sampler "$4" \
		--aggressiveness "${5:-0.5}" --no-prefetch --drop-caches --json "$WORK/$1.json" >/dev/null
	unmount_dlcache
	/usr/bin/python3 - "$WORK/$1.json" "$1" "$3" "$WORK/no-cache.json" <<'PY'
import json, os, sys
epochs = json.load(open(sys.argv[1]))["epochs"]
later = sum(e["seconds"] for e in epochs[1:])
base = json.load(open(sys.argv[4]))["epochs"] if os.path.exists(sys.argv[4]) else epochs
speedup = sum(e["seconds"] for e in base[1:]) / later
times = " ".join("%5.1f" % e["seconds"] for e in epochs)
print("%-24s %4.0f%%  %s   %5.1f%%   %5.2fx   %5.1f%%" % (
    sys.argv[2], 100 * float(sys.argv[3]), times, 100 * epochs[-1]["cache_hit_ratio"],
    speedup, 100 * epochs[-1]["val_accuracy"]))
PY
}

printf '%-24s %5s  %-17s   %6s   %6s   %6s\n' config cache "epoch 1/2/3 (s)" "hit e3" \
	"e2+e3 speedup" "val acc"
run "no-cache"                none 0 shuffle
for fraction in 0.1 0.3; do
	run "freeze"                  freeze     "$fraction" shuffle
	run "lru"                     lru        "$fraction" shuffle
	run "importance"              importance "$fraction" shuffle
	run "importance+cache-aware"  importance "$fraction" cache-aware 0.5
	run "importance+cache-aware.25" importance "$fraction" cache-aware 0.25
done
