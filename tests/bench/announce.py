#!/usr/bin/env python3
"""announce.py MOUNT SAMPLES EPOCHS CACHED JOB: an importance-sampled job
over a real mount, and its source fetches against Belady's MIN's misses on
the trace it read.

Every sample has a fixed lognormal difficulty, its loss, reported after
each batch of 64 reads as RankReporter does.  JOB draws each epoch with
replacement and announces it as prefetch lines:
  sampler        dlcache.CacheAwareSampler (aggressiveness 0.5, fixed),
                 each epoch announced as it starts, as the helper does;
  weights        by the lognormal weights themselves, blind to the cache
                 (issue 14's job), each epoch announced as it starts;
  weights-ahead  the same draws, each epoch announced one epoch early (at
                 the start of the epoch before it).
Files are read one after the other, whole, in the drawn order.  MIN is
computed on the same trace with the cache's room (CACHED files, all of one
size), with bypass: a miss is admitted only when its next use comes before
that of some cached file, which is then evicted.  Prints one JSON line:
accesses, source opens (remote_ops.open over the run: misses and
prefetches), MIN's misses, their ratio, and the mount's hit counts."""
import json
import math
import os
import random
import sys

import dlcache   # the tree's python/, through PYTHONPATH (tests/bench/lib.sh)


def belady_misses(trace, room):
    """Misses of Belady's MIN with bypass over trace (ids), room entries."""
    next_use = [0] * len(trace)
    last = {}
    for k in range(len(trace) - 1, -1, -1):
        next_use[k] = last.get(trace[k], math.inf)
        last[trace[k]] = k
    cached = {}          # id -> its next use
    misses = 0
    for k, i in enumerate(trace):
        if i in cached:
            cached[i] = next_use[k]
            continue
        misses += 1
        if len(cached) < room:
            cached[i] = next_use[k]
            continue
        far = max(cached, key=cached.get)
        if cached[far] > next_use[k]:
            del cached[far]
            cached[i] = next_use[k]
    return misses


def weight_orders(n, weights, epochs):
    """The weights job's order of every epoch (1-based list), drawn up front."""
    return [None] + [random.Random(100 + e).choices(range(n), weights=weights, k=n)
                     for e in range(1, epochs + 2)]


def main():
    mount, samples, epochs, room, job = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), sys.argv[5]
    paths = sorted(os.path.join(d, n) for d, _, ns in os.walk(os.path.join(mount, "train"))
                   for n in ns)[:samples]
    rng = random.Random(11)
    loss = [math.exp(rng.gauss(0, 1)) for _ in paths]
    m = dlcache.Mount(mount)
    ranks = dlcache.RankReporter(m, paths, every=1)
    ranks.report(list(range(len(paths))), loss)      # every sample's difficulty, known
    ranks.rerank()
    if job in ("sampler", "sampler-replacement"):
        # sampler: the default draw (uncached samples read at most once an
        # epoch); sampler-replacement: the draw with replacement, which the
        # rows before 2026-11-26 measured.
        sampler = dlcache.CacheAwareSampler(paths, ranks, aggressiveness=0.5, adaptive=False,
                                            seed=3, replacement=job == "sampler-replacement")
    elif job in ("weights", "weights-ahead"):
        orders = weight_orders(len(paths), loss, epochs)
    else:
        sys.exit("announce.py: JOB is sampler, sampler-replacement, weights or weights-ahead, "
                 "not %r" % job)
    before = m.stats()
    trace = []
    for epoch in range(1, epochs + 1):
        if job.startswith("sampler"):
            sampler.set_epoch(epoch)
            order = list(sampler)
        else:
            order = orders[epoch]
            m.epoch(epoch)
            told = [orders[epoch + 1]] if job == "weights-ahead" else []
            if job == "weights" or epoch == 1:
                told.insert(0, order)
            m.prefetch([paths[i] for o in told for i in o])
        batch = []
        for i in order:
            dlcache.read_sample(paths[i])
            trace.append(i)
            batch.append(i)
            if len(batch) == 64:
                ranks.report(batch, [loss[j] for j in batch])
                batch = []
    after = m.stats()
    opens = after["remote_ops"]["open"] - before["remote_ops"]["open"]
    best = belady_misses(trace, room)
    print(json.dumps({"job": job, "accesses": len(trace), "source_opens": opens,
                      "min_misses": best, "ratio": round(opens / best, 3),
                      "hits": after["hits"] - before["hits"],
                      "prefetches": after["prefetches"] - before["prefetches"]}))


if __name__ == "__main__":
    main()
