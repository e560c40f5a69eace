#!/usr/bin/env python3
"""Reads every file under a mount once per epoch, in a new random order each
epoch (as a DataLoader with shuffle=True does), and prints each epoch's time,
throughput and the mount's hit ratio from .stats."""
import argparse
import json
import os
import random
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mount")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    paths = [os.path.join(d, f) for d, _, files in os.walk(args.mount) for f in files]
    previous = {"hits": 0, "misses": 0}
    for epoch in range(1, args.epochs + 1):
        random.shuffle(paths)
        start = time.monotonic()
        nbytes = 0
        for p in paths:
            with open(p, "rb") as f:
                nbytes += len(f.read())
        seconds = time.monotonic() - start
        with open(os.path.join(args.mount, ".stats")) as f:
            stats = json.load(f)
        hits = stats["hits"] - previous["hits"]
        misses = stats["misses"] - previous["misses"]
        previous = stats
        print("epoch %d: %d files, %.1f MiB in %.2f s (%.0f MiB/s), hit ratio %.0f%%"
              % (epoch, len(paths), nbytes / 2**20, seconds, nbytes / 2**20 / seconds,
                 100.0 * hits / max(1, hits + misses)))


if __name__ == "__main__":
    main()
