#!/usr/bin/env python3
"""phases.py LIST [READERS]: reads every file named in LIST (one path per
line) whole and prints where the time went, per file on average:
"open US read US close US total S".  One reader (the default) reads the
files one after the other; READERS > 1 forks that many processes (as a
DataLoader's workers are), reader k reading files k, k + READERS, ...;
the microseconds are then each reader's own, waits included, averaged over
all files, and total is the wall time of the whole pass.  Beside the same
files read natively it shows what a mount adds to each step of a read (the
OPEN and LOOKUP round trips land in open, a RELEASE in close);
tests/bench/fuse_latency.py shows the same from the kernel's side."""
import os
import sys
import time


def read_all(paths):
    """Reads paths whole; returns the seconds spent in open, read, close."""
    t_open = t_read = t_close = 0.0
    for p in paths:
        a = time.monotonic()
        fd = os.open(p, os.O_RDONLY)
        b = time.monotonic()
        while os.read(fd, 1 << 20):
            pass
        c = time.monotonic()
        os.close(fd)
        d = time.monotonic()
        t_open += b - a
        t_read += c - b
        t_close += d - c
    return t_open, t_read, t_close


def main():
    paths = [p for p in open(sys.argv[1]).read().split("\n") if p]
    readers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    start = time.monotonic()
    if readers <= 1:
        sums = read_all(paths)
    else:
        r, w = os.pipe()
        pids = []
        for k in range(readers):
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.write(w, ("%r %r %r\n" % read_all(paths[k::readers])).encode())
                os._exit(0)
            pids.append(pid)
        os.close(w)
        with os.fdopen(r) as f:
            lines = f.read().split("\n")
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            if status != 0:
                sys.exit("phases.py: a reader failed (status %d)" % status)
        sums = [sum(float(line.split()[i]) for line in lines if line) for i in range(3)]
    total = time.monotonic() - start
    n = len(paths)
    print("open %.1f read %.1f close %.1f total %.3f" %
          (sums[0] / n * 1e6, sums[1] / n * 1e6, sums[2] / n * 1e6, total))


if __name__ == "__main__":
    main()
