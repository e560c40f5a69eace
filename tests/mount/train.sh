#!/usr/bin/env bash
# Training over the mount: examples/train.py (torchvision ImageFolder, a
# DataLoader with workers, per-sample losses) learns a synthetic dataset
# through a cache that holds about 30% of it, reports its loss ranks to
# .control, and the cache-aware sampler makes the third epoch's hit ratio
# well above the cache's fraction.  Needs Debian's python3-torch and
# python3-torchvision (tests/run.sh installs them).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
	{ echo "SKIP: python3-torch and python3-torchvision are not installed"; exit 77; }
EXAMPLES=$SRCDIR/examples

# The training files of the synthetic set are 2 to 4 KiB, so the store
# charges each one block: a cache of 0.3 * N blocks holds 30% of them.
"$PY" "$EXAMPLES/make_dataset.py" "$SRC" --classes 10 --per-class 150 --val-per-class 30 \
	--size 48 >/dev/null
NTRAIN=$(find "$SRC/train" -type f | wc -l)

fraction() { "$PY" -c "import sys; print('%.3f' % (int(sys.argv[1]) / int(sys.argv[2])))" "$@"; }

test_three_epochs_learn_report_ranks_and_hit_above_the_cache_fraction() {
	start_daemon "cache_size=$((NTRAIN * 3 / 10 * 4096))"
	"$PY" "$EXAMPLES/train.py" --data "$MNT" --epochs 3 --workers 2 --threads 2 \
		--sampler cache-aware --aggressiveness 0.5 --json "$WORK/train.json" ||
		fail "train.py failed"
	local cached scored errors
	cached=$(grep -c '^train/' "$MNT/.cached" || true)
	scored=$(stat_value scored_samples)
	errors=$(stat_value control_errors)
	expect_eq "refused .control lines" "$errors" 0
	# Three epochs open every sample three times: through dlcache.pil_loader
	# none of those opens probes for a tty (a handful of opens of the
	# virtual files still may).
	[ "$(stat_value ioctls)" -lt 20 ] ||
		fail "train.py made $(stat_value ioctls) ioctl round trips for $((3 * NTRAIN)) sample reads"
	"$PY" - "$WORK/train.json" "$(fraction "$cached" "$NTRAIN")" "$scored" "$NTRAIN" <<'PY' ||
import json, sys
epochs = json.load(open(sys.argv[1]))["epochs"]
fraction, scored, n = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
last = epochs[-1]
print("cache holds %.0f%% of the training files; epoch 3: hit ratio %.1f%% "
      "(without prefetched files %.1f%%), val accuracy %.1f%%, %d of %d samples scored"
      % (100 * fraction, 100 * last["hit_ratio"], 100 * last["cache_hit_ratio"],
         100 * last["val_accuracy"], scored, n))
problems = []
if not 0.2 <= fraction <= 0.4:
    problems.append("the cache holds %.2f of the files, not about 0.3" % fraction)
if last["val_accuracy"] < 0.5 or last["val_accuracy"] <= epochs[0]["val_accuracy"] - 0.05:
    problems.append("accuracy did not rise well above chance (0.1): %s"
                    % [e["val_accuracy"] for e in epochs])
if scored != last["samples_with_loss"] or scored < 0.7 * n:
    problems.append("%d samples have a score in .stats, but %d of %d have a loss"
                    % (scored, last["samples_with_loss"], n))
if last["cache_hit_ratio"] < fraction + 0.15:
    problems.append("epoch 3's cache hit ratio %.3f is not well above the cache fraction %.3f"
                    % (last["cache_hit_ratio"], fraction))
if problems:
    sys.exit("; ".join(problems))
PY
		fail "training over the mount missed its targets"
}

# Python's buffered open() makes an ioctl (isatty) that the kernel sends to
# the daemon: .stats counts each one, and the dlcache package's loaders make none,
# while giving the bytes and the image torchvision's default loader gives.
test_the_helper_loaders_make_no_ioctl_round_trip() {
	start_daemon
	"$PY" - "$MNT" "$SRC" <<'PY' || fail "the loaders' ioctl round trips are wrong"
import json, os, sys
import dlcache
from torchvision.datasets.folder import default_loader
mnt, src = sys.argv[1:]
def ioctls():   # read unbuffered, so that reading .stats makes no ioctl either
    with open(os.path.join(mnt, ".stats"), "rb", buffering=0) as f:
        return json.loads(f.readall())["ioctls"]
names = sorted(os.path.relpath(os.path.join(d, n), mnt)
               for d, _, ns in os.walk(os.path.join(mnt, "train")) for n in ns)[:20]
problems = []
before = ioctls()
for n in names:
    with open(os.path.join(mnt, n), "rb") as f:
        f.read()
buffered = ioctls() - before
if buffered != len(names):
    problems.append("%d buffered opens counted %d ioctls" % (len(names), buffered))
before = ioctls()
for n in names:
    with open(os.path.join(src, n), "rb") as f:
        if dlcache.read_sample(os.path.join(mnt, n)) != f.read():
            problems.append("read_sample(%s) differs from the source" % n)
    if dlcache.pil_loader(os.path.join(mnt, n)).tobytes() != \
            default_loader(os.path.join(src, n)).tobytes():
        problems.append("pil_loader(%s) differs from torchvision's loader" % n)
helpers = ioctls() - before
if helpers != 0:
    problems.append("read_sample and pil_loader made %d ioctls" % helpers)
print("buffered opens: %d ioctls for %d files; the helper loaders: %d" % (buffered, len(names), helpers))
if problems:
    sys.exit("; ".join(problems))
PY
}

test_a_directory_that_is_not_a_mount_trains_without_reporting() {
	# The baseline of the benchmark: the same script straight on the source.
	"$PY" "$EXAMPLES/train.py" --data "$SRC" --epochs 1 --workers 0 --threads 2 \
		--sampler shuffle >"$WORK/out" || fail "train.py on a plain directory failed"
	grep -q "is not a dlcache mount" "$WORK/out" || fail "no notice: $(cat "$WORK/out")"
	grep -q "^epoch 1: " "$WORK/out" || fail "no epoch line: $(cat "$WORK/out")"
}

test_bad_sampler_options_are_refused_in_one_sentence() {
	local opt
	for opt in "--repeats 0" "--recheck -1"; do
		# shellcheck disable=SC2086  # opt is an option and its value
		if "$PY" "$EXAMPLES/train.py" --data "$SRC" $opt >"$WORK/out" 2>&1; then
			fail "train.py accepted $opt"
		fi
		grep -q "^train.py: error: ${opt%% *} takes" "$WORK/out" ||
			fail "no one-sentence error for $opt: $(tail -3 "$WORK/out")"
	done
}

run_tests
