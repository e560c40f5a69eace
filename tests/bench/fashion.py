#!/usr/bin/python3
"""fashion.py - the Python half of tests/bench/fashion.sh.

    fashion.py export DIR TRAIN TEST   Debian's dataset-fashion-mnist as an
        ImageFolder of PNGs: DIR/train/CLASS/NNNNN.png (the first TRAIN
        images of the training set, all 60,000 if TRAIN is 0) and
        DIR/test/CLASS/NNNNN.png (the first TEST of the 10,000 test images).
        Both sets are balanced enough in their first images (about 10% per
        class); 28x28 grayscale, a few hundred bytes each.
    fashion.py table TARGETS JSON...   One row per configuration (the files
        are NAME.seed.json, as fashion.sh writes them): over the seeds, the
        median and spread (min-max) of the training time to each target
        accuracy, the mean epoch time, the hit ratio of the epochs after the
        first, and the accuracy after the last epoch; then the ratios the
        issue sets targets for.
    fashion.py epochs JSON...          Per run, per epoch: seconds, validation
        accuracy, hit ratio, and for the cache-aware sampler the
        aggressiveness the epoch ran with, the distinct samples among its
        reads and the variance of its loss weights.

Standard library and PIL only (python3-pil).
"""
import collections
import gzip
import json
import os
import statistics
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"
CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat",
           "sandal", "shirt", "sneaker", "bag", "boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xff
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def export(root, train, test):
    from PIL import Image
    for split, prefix, count in (("train", "train", train), ("test", "t10k", test)):
        shape, images = read_idx(os.path.join(SOURCE, prefix + "-images-idx3-ubyte.gz"))
        _, labels = read_idx(os.path.join(SOURCE, prefix + "-labels-idx1-ubyte.gz"))
        n, rows, cols = shape
        count = n if count <= 0 else min(count, n)
        for name in CLASSES:
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
        size = rows * cols
        for i in range(count):
            image = Image.frombytes("L", (cols, rows), images[i * size:(i + 1) * size])
            image.save(os.path.join(root, split, CLASSES[labels[i]], "%05d.png" % i))
        print("%s: %d images" % (split, count))


def table(targets, files):
    runs = collections.defaultdict(list)
    for path in files:
        name = os.path.basename(path).rsplit(".", 2)[0]
        with open(path) as f:
            runs[name].append(json.load(f))
    head = "%-26s" % "config"
    for t in targets:
        head += "  %-19s" % ("time to %g%% (s)" % (100 * t))
    head += "  %-13s  %-8s  %-15s  %s" % ("epoch (s)", "hit e2+", "final acc (%)", "seeds")
    print(head)
    summary = {}
    for name, results in runs.items():
        row = "%-26s" % name
        medians = []
        for t in targets:
            times = [r["reached"].get(str(t)) for r in results]
            got = sorted(x for x in times if x is not None)
            if len(got) == len(times):
                med = statistics.median(got)
                cell = "%6.1f (%.0f-%.0f)" % (med, got[0], got[-1])
            else:
                med = None
                cell = "%d of %d reached" % (len(got), len(times))
            medians.append(med)
            row += "  %-19s" % cell
        epoch = statistics.mean(e["seconds"] for r in results for e in r["epochs"])
        later = [e["hit_ratio"] for r in results for e in r["epochs"][1:]
                 if e["hit_ratio"] is not None]
        hit = statistics.mean(later) if later else 0.0
        final = sorted(100 * r["epochs"][-1]["val_accuracy"] for r in results)
        row += "  %13.1f  %7.1f%%  %5.1f (%.1f-%.1f)  %d" % (
            epoch, 100 * hit, statistics.median(final), final[0], final[-1], len(results))
        print(row)
        summary[name] = (medians, statistics.mean(final))
    # The targets: cache-aware against freeze + shuffle at the same
    # cache size (time to each target), and against the plain shuffle
    # without cache (final accuracy, equal epochs).
    plain = summary.get("no-cache")
    for name, (medians, final) in summary.items():
        if not name.startswith("importance+sampler"):
            continue
        size = name.rsplit("-", 1)[-1]
        freeze = summary.get("freeze-" + size)
        if freeze:
            for t, mine, theirs in zip(targets, medians, freeze[0]):
                ratio = "%.2fx" % (mine / theirs) if mine and theirs else "n/a"
                print("%s: time to %g%% = %s of freeze-%s's (target <= 0.6x)"
                      % (name, 100 * t, ratio, size))
        if plain:
            print("%s: final accuracy %+.1f points against no-cache's plain shuffle "
                  "(target >= -1)" % (name, final - plain[1]))


def epochs(files):
    print("%-24s %5s %7s %7s %6s %5s %8s %8s" % ("run", "epoch", "seconds", "val %",
                                               "hit %", "a", "distinct", "w var"))
    for path in files:
        name = os.path.basename(path)[:-len(".json")]
        with open(path) as f:
            run = json.load(f)
        for e in run["epochs"]:
            draw = e.get("draw") or {}
            a = e.get("aggressiveness")
            print("%-24s %5d %7.1f %7.1f %6.1f %5s %8s %8s" % (
                name, e["epoch"], e["seconds"], 100 * e["val_accuracy"],
                100 * (e["hit_ratio"] or 0), "-" if a is None else "%.2f" % a,
                draw.get("distinct", "-"),
                "-" if "weight_var" not in draw else "%.3f" % draw["weight_var"]))


def main(argv):
    if len(argv) == 5 and argv[1] == "export":
        export(argv[2], int(argv[3]), int(argv[4]))
    elif len(argv) >= 3 and argv[1] == "epochs":
        epochs(argv[2:])
    elif len(argv) >= 4 and argv[1] == "table":
        table([float(t) for t in argv[2].split(",")], argv[3:])
    else:
        sys.exit("usage: fashion.py export DIR TRAIN TEST | fashion.py table TARGETS JSON... | "
                 "fashion.py epochs JSON...")


if __name__ == "__main__":
    main(sys.argv)
