#!/usr/bin/env python3
"""churn_trace.py - a plain per-epoch shuffle whose scores churn, for
`dlcache simulate --trace FILE`.

Each line is one read: "ID SCORE", the score the job reports for the sample
just read.  --mode noise: a fresh uniform score per read (ranks rewritten
with no memory); --mode loss: per-sample difficulty times 0.7^visits plus
Gaussian noise (losses falling as training visits a sample).

  python3 tests/bench/churn_trace.py --mode noise > /tmp/t.txt
  build/dlcache simulate --trace /tmp/t.txt

`dlcache simulate --trace churn` generates a richer job in process (ranks
written after each batch, not with each read; DistributedSampler partitions
with --world; announced orders with --announce); this script stays for the
per-read worst case (--mode noise) and as an example of the trace format.
"""
import argparse
import random
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--mode", choices=("noise", "loss"), default="noise")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    difficulty = [rng.random() for _ in range(args.samples)]
    visits = [0] * args.samples
    out = sys.stdout
    for _ in range(args.epochs):
        order = list(range(args.samples))
        rng.shuffle(order)
        for i in order:
            visits[i] += 1
            if args.mode == "noise":
                score = rng.random()
            else:
                score = difficulty[i] * 0.7 ** visits[i] + rng.gauss(0, 0.05)
            out.write("%d %.5f\n" % (i, score))


if __name__ == "__main__":
    main()
