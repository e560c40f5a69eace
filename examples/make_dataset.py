#!/usr/bin/env python3
"""Writes a small ImageFolder-shaped dataset: ROOT/train/CLASS/NAME.JPEG.

The files have JPEG-like sizes (lognormal around --mean-size bytes) and
random contents: enough to exercise a cache, not to train a model.
"""
import argparse
import os
import random


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--mean-size", type=int, default=110_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    total = 0
    for c in range(args.classes):
        directory = os.path.join(args.root, "train", "n%08d" % c)
        os.makedirs(directory, exist_ok=True)
        for i in range(args.per_class):
            size = max(1024, int(rng.lognormvariate(0, 0.4) * args.mean_size))
            with open(os.path.join(directory, "n%08d_%d.JPEG" % (c, i)), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0" + rng.randbytes(size - 4))
            total += size
    print("%d files, %.1f MiB in %s" % (args.classes * args.per_class, total / 2**20, args.root))


if __name__ == "__main__":
    main()
