#!/usr/bin/env python3
"""peers_read.py MNT ORDER READERS small|tar [CONTROL] - one epoch of a
training job's input, the same for every file system of tests/bench/peers.sh.

ORDER holds the epoch's paths (relative to MNT), one a line, in the order the
job reads them.  READERS processes (DataLoader workers) take the next path
from a shared counter, so the files are opened in ORDER's order give or take
the readers' drift.  "small" reads each file whole in one read() (an
ImageNet-like sample); "tar" streams each file with Python's tarfile and
reads every member (a WebDataset-like shard read sequentially).

With CONTROL (MNT/.control of a dlcache mount), the epoch's order is
announced there first, as prefetch lines (dlcache-control(5)), timed with
the epoch.

Prints "SECONDS BYTES FILES" (the bytes are the members' for tar).
"""
import multiprocessing
import os
import sys
import tarfile
import time


def read_small(path):
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(size + 1)
    return len(data)


def read_tar(path):
    total = 0
    with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tar:
        for member in tar:
            if member.isfile():
                total += len(tar.extractfile(member).read())
    return total


def worker(mnt, paths, counter, totals, slot, mode):
    read = read_tar if mode == "tar" else read_small
    total = 0
    while True:
        with counter.get_lock():
            i = counter.value
            counter.value += 1
        if i >= len(paths):
            break
        total += read(os.path.join(mnt, paths[i]))
    totals[slot] = total


def main():
    mnt, order, readers, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    control = sys.argv[5] if len(sys.argv) > 5 else None
    with open(order) as f:
        paths = f.read().split("\n")
    paths = [p for p in paths if p]
    counter = multiprocessing.Value("l", 0)
    totals = multiprocessing.Array("q", readers)
    procs = [multiprocessing.Process(target=worker, args=(mnt, paths, counter, totals, i, mode))
             for i in range(readers)]
    start = time.monotonic()
    if control:
        with open(control, "w") as c:
            c.write("".join("prefetch %s\n" % p for p in paths))
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    if any(p.exitcode for p in procs):
        sys.exit("a reader failed")
    print("%.3f %d %d" % (elapsed, sum(totals), len(paths)))


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
