#!/usr/bin/env bash
# The hit-ratio relations of the time-to-accuracy benchmark
# (tests/bench/fashion.sh), without timing: over the same short training
# (examples/train.py on a synthetic ImageFolder, 2 DataLoader workers, a
# cache of 30% of the training files), the cache-aware sampler at a fixed
# aggressiveness of 0.5 (the adaptive controller keeps the first two
# epochs plain, so a run this short never leans) with the importance
# policy hits well above a plain shuffle with the
# freeze policy, which hits about the cache's share; and the sampler
# announces its whole order (prefetch lines in reading order, repeats
# included), which the daemon counts and prefetches.  Needs Debian's
# python3-torch and python3-torchvision (tests/run.sh installs them).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
	{ echo "SKIP: python3-torch and python3-torchvision are not installed"; exit 77; }
EXAMPLES=$SRCDIR/examples
EPOCHS=2

# Files of 1 to 3 KiB: the store charges each one 4 KiB block.
"$PY" "$EXAMPLES/make_dataset.py" "$SRC" --classes 10 --per-class 100 --val-per-class 10 \
	--size 32 >/dev/null
NTRAIN=$(find "$SRC/train" -type f | wc -l)
CACHE_SIZE=$((NTRAIN * 3 / 10 * 4096))

# train NAME POLICY SAMPLER [TRAIN.PY OPTIONS]: a fresh cache, EPOCHS epochs,
# the figures in $WORK/NAME.json and the final .stats in $WORK/NAME.stats.
train() {
	local name=$1 policy=$2 sampler=$3
	shift 3
	rm -rf "$CACHE"
	start_daemon "policy=$policy,cache_size=$CACHE_SIZE"
	"$PY" "$EXAMPLES/train.py" --data "$MNT" --epochs $EPOCHS --workers 2 --threads 2 \
		--sampler "$sampler" --json "$WORK/$name.json" "$@" >"$WORK/$name.out" ||
		fail "train.py ($name) failed: $(tail -5 "$WORK/$name.out")"
	cp "$MNT/.stats" "$WORK/$name.stats"
	expect_eq "refused .control lines ($name)" "$(stat_value control_errors)" 0
	stop_daemon
}

test_the_sampler_hits_more_than_freeze_and_announces_its_order() {
	train freeze freeze shuffle --no-report --no-prefetch
	train sampler importance cache-aware --weights --fixed --aggressiveness 0.5
	"$PY" - "$WORK" "$NTRAIN" "$EPOCHS" <<'PY' || fail "the hit-ratio relations do not hold"
import json, sys
work, n, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {k: json.load(open("%s/%s.json" % (work, k)))["epochs"] for k in ("freeze", "sampler")}
stats = {k: json.load(open("%s/%s.stats" % (work, k))) for k in ("freeze", "sampler")}
# Hits that the cache itself served (prefetched files excluded), after the
# first epoch filled it.
freeze, sampler = runs["freeze"][-1]["cache_hit_ratio"], runs["sampler"][-1]["cache_hit_ratio"]
print("last epoch's cache hit ratio: freeze + shuffle %.3f, importance + sampler %.3f "
      "(aggressiveness %s)" % (freeze, sampler, [e["aggressiveness"] for e in runs["sampler"]]))
s = stats["sampler"]
print("sampler run: %d control lines, %d prefetches, %d prefetch hits, %d hits, %d misses"
      % (s["control_lines"], s["prefetches"], s["prefetch_hits"], s["hits"], s["misses"]))
problems = []
if not freeze > 0.15:
    problems.append("freeze + shuffle hit %.3f, not about the cache's 0.3" % freeze)
if not sampler > freeze + 0.1:
    problems.append("the sampler hit %.3f, not well above freeze's %.3f" % (sampler, freeze))
# Each epoch announces n draws: epoch lines + prefetch lines + scores.
if s["control_lines"] < epochs * (n + 1) + n:
    problems.append("%d control lines: the sampler did not announce %d draws per epoch"
                    % (s["control_lines"], n))
if stats["freeze"]["prefetches"] != 0 or s["prefetches"] <= 0:
    problems.append("prefetches: %d without announcing, %d with"
                    % (stats["freeze"]["prefetches"], s["prefetches"]))
if problems:
    sys.exit("; ".join(problems))
PY
}

test_repeats_one_reads_each_cached_sample_once_in_a_short_epoch() {
	# --repeats 1: the lean epoch reads each cached sample once and a share
	# of the misses, and ends short of N; the cosine schedule anneals by
	# the share of epochs done (a schedule by step would fail to reach 0).
	train short importance cache-aware --weights --fixed --aggressiveness 0.5 \
		--repeats 1 --schedule cosine
	"$PY" - "$WORK" "$NTRAIN" <<'PY' || fail "the lean epoch with --repeats 1 is not short"
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
epochs = json.load(open("%s/short.json" % work))["epochs"]
lean = [e for e in epochs if e["aggressiveness"] and e["draw"]["distinct"] < n]
print("draws:", [e["draw"] for e in epochs])
if not lean:
    sys.exit("no epoch leaned on the cache")
d = lean[-1]["draw"]
if d["reads"] != d["distinct"]:
    sys.exit("%d reads of %d samples: a cached sample was read twice" % (d["reads"], d["distinct"]))
if not d["cached"] <= d["reads"] < n:
    sys.exit("%d reads with %d cached: not a short epoch of %d" % (d["reads"], d["cached"], n))
PY
}

run_tests
