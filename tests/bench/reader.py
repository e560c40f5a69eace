#!/usr/bin/env python3
"""reader.py LIST THREADS: reads every file named in LIST (one path per line)
whole, with THREADS threads taking files in list order, and prints
"SECONDS FILES BYTES".  The reads release the GIL, so threads overlap."""
import os
import sys
import threading
import time


def main():
    paths = open(sys.argv[1]).read().split("\n")
    paths = [p for p in paths if p]
    nthreads = int(sys.argv[2])
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
            fd = os.open(paths[i], os.O_RDONLY)
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                got += len(chunk)
            os.close(fd)
        with lock:
            state["bytes"] += got

    threads = [threading.Thread(target=worker) for _ in range(nthreads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("%.3f %d %d" % (time.monotonic() - start, len(paths), state["bytes"]))


if __name__ == "__main__":
    main()
