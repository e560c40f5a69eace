#!/usr/bin/env python3
"""reader.py LIST THREADS [HOW]: reads every file named in LIST (one path per
line) whole, with THREADS threads taking files in list order, and prints
"SECONDS FILES BYTES".  The reads release the GIL, so threads overlap.

HOW is how each file is read:
  os      os.open and 1 MiB os.read calls (the default: no Python file object);
  open    open(path, "rb").read(), as torchvision's loaders open a sample
          (Python before 3.14 asks each file whether it is a tty first: an
          ioctl, which a FUSE mount sends to the daemon);
  helper  the dlcache package's read_sample (unbuffered: no such question)."""
import os
import sys
import threading
import time

import dlcache   # the tree's python/, through PYTHONPATH (tests/bench/lib.sh)


def read_os(path):
    fd = os.open(path, os.O_RDONLY)
    got = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        got += len(chunk)
    os.close(fd)
    return got


def read_open(path):
    with open(path, "rb") as f:
        return len(f.read())


def read_helper(path):
    return len(dlcache.read_sample(path))


def main():
    paths = open(sys.argv[1]).read().split("\n")
    paths = [p for p in paths if p]
    nthreads = int(sys.argv[2])
    read = {"os": read_os, "open": read_open, "helper": read_helper}[
        sys.argv[3] if len(sys.argv) > 3 else "os"]
    lock = threading.Lock()
    state = {"next": 0, "bytes": 0}

    def worker():
        got = 0
        while True:
            with lock:
                i = state["next"]
                state["next"] = i + 1
            if i >= len(paths):
                break
            got += read(paths[i])
        with lock:
            state["bytes"] += got

    threads = [threading.Thread(target=worker) for _ in range(nthreads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("%.4f %d %d" % (time.monotonic() - start, len(paths), state["bytes"]))


if __name__ == "__main__":
    main()
