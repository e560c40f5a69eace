#!/usr/bin/env python3
"""phases.py LIST: reads every file named in LIST (one path per line) whole,
one after the other, and prints where the time went, per file on average:
"open US read US close US total S".  Beside the same files read natively
it shows what a mount adds to each step of a read (the OPEN and LOOKUP round
trips land in open, a RELEASE in close); tests/bench/fuse_latency.py shows
the same from the kernel's side."""
import os
import sys
import time


def main():
    paths = [p for p in open(sys.argv[1]).read().split("\n") if p]
    t_open = t_read = t_close = 0.0
    start = time.monotonic()
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
    n = len(paths)
    print("open %.1f read %.1f close %.1f total %.3f" %
          (t_open / n * 1e6, t_read / n * 1e6, t_close / n * 1e6, time.monotonic() - start))


if __name__ == "__main__":
    main()
