#!/usr/bin/env python3
"""tier_epochs.py - epochs of a job on N nodes, one mount per node, on one machine.

Every epoch draws a new permutation of the dataset's files (one seed, the
epoch's number added) and node k reads perm[k::N] from its own mount, with
--readers threads per node; every file read is compared with the source.
Between epochs the kernel's page cache is dropped, so reads reach the daemons.

A fault can be injected half-way through one epoch (--fault-epoch):
  kill:PID      kill -9 of a memcached started by the caller
  stop:PID      SIGSTOP of it; SIGCONT at the end of the epoch
  corrupt:PORT  every value on that memcached gets one payload byte flipped
                (written back with the text protocol), before the epoch

Files are read as the training helper reads a sample (dlcache.read_sample:
unbuffered, no ioctl).  Each read is compared with the source file, read
then; with --source-crc, with the source's length and CRC-32, computed
before the first epoch, so that an epoch's seconds are the mounts' reads and
a CRC (zlib's, at about 5 GB/s, out of the GIL), not also a cold read of the
source from disk, which costs as much.  (Holding the source's bytes to
memcmp instead slowed the first epoch 3x here: compares under the GIL.)

Prints one JSON object per epoch: reads, wrong (bytes differ), failed (read
errors), seconds, max_read_seconds, source_opens (remote_ops.open summed
over the mounts' .stats during the epoch), tier_hits, local_hits.
"""
import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import zlib

import dlcache   # the tree's python/, through PYTHONPATH (tests/mount/lib.sh)
import tier_adversary as memcached   # its text-protocol client (same folder)


def stats(mount):
    return json.loads(dlcache.read_sample(os.path.join(mount, ".stats")))


def totals(mounts, plain=False):
    """Source opens, hits and tier hits summed over the mounts' .stats; all
    0 for plain directories (--plain: the native baseline)."""
    opens = hits = tier_hits = 0
    for m in [] if plain else mounts:
        s = stats(m)
        opens += s["remote_ops"]["open"]
        hits += s["hits"]
        for name, server in s.get("tier", {}).items():
            if isinstance(server, dict):
                tier_hits += server["hits"]
    return opens, hits, tier_hits


def corrupt_all(port):
    """Flips the last byte of every value on the server; returns how many."""
    done = 0
    for key in memcached.all_keys(port):
        value = memcached.get(port, key)
        if value is None:
            continue
        value = bytearray(value)
        value[-1] ^= 0xFF
        if memcached.put(port, key, bytes(value)):
            done += 1
    return done


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("mounts", nargs="+")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--fault", default="")
    ap.add_argument("--fault-epoch", type=int, default=-1)
    ap.add_argument("--plain", action="store_true",
                    help="the mounts are plain directories (a native baseline): no .stats")
    ap.add_argument("--source-crc", action="store_true",
                    help="compare each read with the source's length and CRC-32, computed once")
    args = ap.parse_args()

    files = []
    for d, _, names in os.walk(os.path.join(args.src, "train")):
        files += sorted(os.path.relpath(os.path.join(d, n), args.src) for n in names)
    files.sort()
    nodes = len(args.mounts)
    def crc(data):
        return len(data), zlib.crc32(data)

    held = {p: crc(dlcache.read_sample(os.path.join(args.src, p))) for p in files} \
        if args.source_crc else None

    def same_as_source(p, data):
        if held is not None:
            return crc(data) == held[p]
        return data == dlcache.read_sample(os.path.join(args.src, p))

    for epoch in range(args.epochs):
        perm = files[:]
        random.Random(args.seed * 1000 + epoch).shuffle(perm)
        drop_caches()
        fault_kind, _, fault_arg = args.fault.partition(":")
        faulting = epoch == args.fault_epoch and fault_kind
        if faulting and fault_kind == "corrupt":
            print("corrupted %d values" % corrupt_all(int(fault_arg)), file=sys.stderr)
        before = totals(args.mounts, args.plain)
        lock = threading.Lock()
        result = {"epoch": epoch, "reads": 0, "wrong": 0, "failed": 0, "max_read_seconds": 0.0}
        half = threading.Event()
        errors = []


        def reader(k, r):
            mine = perm[k::nodes][r::args.readers]
            for p in mine:
                t0 = time.monotonic()
                try:
                    data = dlcache.read_sample(os.path.join(args.mounts[k], p))
                    ok = True
                except OSError as e:
                    data, ok = None, False
                    errors.append("%s: %s" % (p, e))
                dt = time.monotonic() - t0
                good = not ok or same_as_source(p, data)
                with lock:
                    result["reads"] += 1
                    result["max_read_seconds"] = max(result["max_read_seconds"], dt)
                    if not ok:
                        result["failed"] += 1
                    elif not good:
                        result["wrong"] += 1
                    if result["reads"] * 2 >= len(perm):
                        half.set()

        t0 = time.monotonic()
        threads = [threading.Thread(target=reader, args=(k, r))
                   for k in range(nodes) for r in range(args.readers)]
        for t in threads:
            t.start()
        if faulting and fault_kind in ("kill", "stop"):
            half.wait()
            os.kill(int(fault_arg), signal.SIGKILL if fault_kind == "kill" else signal.SIGSTOP)
        for t in threads:
            t.join()
        result["seconds"] = round(time.monotonic() - t0, 3)
        if faulting and fault_kind == "stop":
            os.kill(int(fault_arg), signal.SIGCONT)
        after = totals(args.mounts, args.plain)
        result["source_opens"] = after[0] - before[0]
        result["local_hits"] = after[1] - before[1]
        result["tier_hits"] = after[2] - before[2]
        result["max_read_seconds"] = round(result["max_read_seconds"], 3)
        for e in errors[:5]:
            print("read failed: " + e, file=sys.stderr)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
