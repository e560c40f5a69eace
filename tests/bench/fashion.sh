#!/usr/bin/env bash
# fashion.sh - time to accuracy on real data (issue 14, item 7): Debian's
# Fashion-MNIST exported as an ImageFolder of PNGs, a small CNN trained on
# the CPU (examples/train.py --model gray28, SGD with a cosine learning-rate
# schedule, 2 DataLoader workers) over a dlcache mount of an emulated slow
# source, with caches holding FRACTIONS of the training files:
#   no-cache                 plain shuffle, policy=none (every read a miss)
#   freeze-F                 plain shuffle, policy=freeze
#   importance-F             plain shuffle, policy=importance (ranks reported)
#   importance+sampler-F     the adaptive cache-aware sampler, importance
#                            weights 1/(N p_i) on the losses
# Every run announces its order (prefetch lines) and mounts with the same
# options: SOURCE_DELAY per source call (3 calls per miss), one prefetch
# thread 16 files ahead, so that the source stays the bottleneck and the
# cache decides the time.  The test images are read from local disk, held
# in memory, and evaluation is not timed.  Per configuration, over SEEDS:
# median and spread of the training time to each target accuracy, epoch
# time, hit ratio after the first epoch, final accuracy.
#
#   tests/bench/fashion.sh                  (the full run: 60000 images)
#   TRAIN=3000 TEST=2000 EPOCHS=4 SEEDS="1 2" FRACTIONS="0.3" \
#   TARGETS=0.75,0.8 tests/bench/fashion.sh (a reduced run)
#   ONLY=sampler tests/bench/fashion.sh     (the rows whose name matches, and no-cache)
#   SAMPLER_OPTS="--weights --fixed --aggressiveness 0.2" ...
#                                           (the sampler row's train.py options;
#                                            default --weights, empty for none)
#   SAMPLER_OPTS="--weights --repeats 1" ... (short lean epochs: each cached
#                                            sample read once, no repeats)
#   NO_CACHE=0 ...                          (without the no-cache row: freeze +
#                                            shuffle trains the same model, seed by seed)
#   KEEP=DIR ...                            (copy each job's log, JSON and the daemon's
#                                            .stats at its end into DIR as it ends;
#                                            fashion.py epochs DIR/*.json prints
#                                            them epoch by epoch)
#   WARM=1 ...                              (a warm cache: before each measured job,
#                                            the node's previous job, the same
#                                            configuration and another seed, runs
#                                            WARM epochs on the same cache; remounted)
. "$(dirname "$0")/lib.sh"
. tests/deps.sh
dlc_install_packages "${DLC_TRAIN_PACKAGES[@]}" "${DLC_FASHION_PACKAGES[@]}"
TRAIN=${TRAIN:-60000}
TEST=${TEST:-10000}
EPOCHS=${EPOCHS:-6}
SEEDS=${SEEDS:-1 2 3}
FRACTIONS=${FRACTIONS:-0.1 0.3}
TARGETS=${TARGETS:-0.85,0.88}
SOURCE_DELAY=${SOURCE_DELAY:-3ms}
WARM=${WARM:-0}
PY=/usr/bin/python3

DATA=/var/tmp/dlcache-bench-fashion-$TRAIN-$TEST
if [ ! -f "$DATA/complete" ]; then
	rm -rf "$DATA"
	# The mount's root holds train/ only; the test set stays on local disk.
	"$PY" tests/bench/fashion.py export "$DATA" "$TRAIN" "$TEST"
	mkdir "$DATA/src"
	mv "$DATA/train" "$DATA/src/train"
	touch "$DATA/complete"
fi
# What the store charges for the training files: whole 4 KiB blocks.
CHARGED=$(find "$DATA/src/train" -type f -printf '%s\n' |
	awk '{b += int(($1 + 4095) / 4096) * 4096} END {print b}')
NTRAIN=$(find "$DATA/src/train" -type f | wc -l)
echo "Fashion-MNIST: $NTRAIN training PNGs ($CHARGED bytes charged), $TEST test images;" \
	"$EPOCHS epochs, seeds $SEEDS, after a previous job of $WARM epochs; source: $SOURCE_DELAY per call; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"

# job LOG EPOCHS SEED SAMPLER [TRAIN.PY OPTIONS...]: one training job on a
# mount with $opts, its output in LOG.
job() {
	local log=$1 epochs=$2 seed=$3 sampler=$4
	shift 4
	mount_dlcache "$DATA/src" "$opts"
	"$PY" examples/train.py --data "$MNT" --val "$DATA/test" --model gray28 \
		--epochs "$epochs" --schedule cosine --lr 0.05 --workers 2 --threads 2 \
		--sampler "$sampler" --seed "$seed" "$@" >"$log" || { cat "$log"; exit 1; }
	# The daemon's counters (admissions, evictions, hits) beside the log.
	cp "$MNT/.stats" "${log%.log}.stats"
	unmount_dlcache
}

# run NAME POLICY FRACTION SAMPLER [TRAIN.PY OPTIONS...]
run() {
	local name=$1 policy=$2 fraction=$3 sampler=$4 seed
	shift 4
	[[ "$name" =~ ${ONLY:-.} ]] || { [ "$name" = no-cache ] && [ "${NO_CACHE:-1}" = 1 ]; } || return 0
	local size
	size=$(awk "BEGIN {printf \"%d\", $CHARGED * $fraction}")
	[ "$size" -gt 0 ] || size=1M   # policy=none keeps nothing; any size will do
	opts="policy=$policy,cache_size=$size,source_delay=$SOURCE_DELAY,prefetch_threads=1,prefetch_window=16"
	for seed in $SEEDS; do
		rm -rf "$WORK/cache"
		if [ "$WARM" -gt 0 ]; then
			# The node's previous job: the same configuration with another
			# seed, for WARM epochs; its cache persists into the next mount.
			job "$WORK/$name.$seed.warm" "$WARM" $((seed + 1000)) "$sampler" "$@"
		fi
		job "$WORK/$name.$seed.log" "$EPOCHS" "$seed" "$sampler" --targets "$TARGETS" \
			--drop-caches --json "$WORK/$name.$seed.json" "$@"
		echo "  $name seed $seed: $(tail -1 "$WORK/$name.$seed.log")"
		[ -z "${KEEP:-}" ] || cp "$WORK/$name.$seed.log" "$WORK/$name.$seed.json" \
			"$WORK/$name.$seed.stats" "$KEEP/"
	done
}

run no-cache none 0 shuffle
for f in $FRACTIONS; do
	pct=$(awk "BEGIN {printf \"%d\", $f * 100}")
	run "freeze-$pct"             freeze     "$f" shuffle
	run "importance-$pct"         importance "$f" shuffle
	# shellcheck disable=SC2086  # SAMPLER_OPTS is a list of options
	run "importance+sampler-$pct" importance "$f" cache-aware ${SAMPLER_OPTS---weights}
done
echo
"$PY" tests/bench/fashion.py table "$TARGETS" "$WORK"/*.json
