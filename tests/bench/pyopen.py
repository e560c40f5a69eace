#!/usr/bin/env python3
"""pyopen.py LIST THREADS HOW: reads every file named in LIST (one path per
line) whole, the way a Python training job does, with THREADS threads taking
files in list order, and prints "SECONDS FILES BYTES".  HOW is "open"
(open(path, "rb").read(), as torchvision's loaders open a sample: Python
before 3.14 asks each file whether it is a tty first) or "helper"
(examples/dlcache.py's read_sample: unbuffered, no such question)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import dlcache  # noqa: E402


def read_open(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    paths = [p for p in open(sys.argv[1]).read().split("\n") if p]
    nthreads = int(sys.argv[2])
    read = {"open": read_open, "helper": dlcache.read_sample}[sys.argv[3]]
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
            got += len(read(paths[i]))
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
