#!/usr/bin/env python3
"""residency.py CACHE resident|evict NAME...: for each NAME (the test tree's
train/c/fNAME), finds its cache file through CACHE/index.db (the daemon
commits a new row within a second: waits up to 10 s for it) and prints how
many of the file's pages are in the page cache (mincore(2) on a mapping of
it, which reads nothing), space separated, or evicts them
(written back, then POSIX_FADV_DONTNEED)."""
import ctypes
import mmap
import os
import sqlite3
import sys
import time

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


def resident_pages(path):
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    if addr is None or addr == MAP_FAILED:
        sys.exit("residency.py: cannot map %s" % path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = ctypes.create_string_buffer(pages)
    rc = libc.mincore(addr, size, vec)
    libc.munmap(addr, size)
    if rc != 0:
        sys.exit("residency.py: mincore failed on %s" % path)
    return sum(b & 1 for b in vec.raw)


def cache_file(cache, name):
    path = "train/c/f" + name
    deadline = time.monotonic() + 10
    while True:
        db = sqlite3.connect("file:%s/index.db?mode=ro" % cache, uri=True)
        row = db.execute("SELECT name FROM entries WHERE path = ?", (path,)).fetchone()
        db.close()
        if row:
            return os.path.join(cache, "data", row[0][:2], row[0])
        if time.monotonic() > deadline:
            sys.exit("residency.py: %s has no row in %s/index.db" % (path, cache))
        time.sleep(0.1)


def main():
    cache, cmd, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    out = []
    for name in names:
        f = cache_file(cache, name)
        if cmd == "evict":
            fd = os.open(f, os.O_RDONLY)
            os.fsync(fd)        # dirty pages (a file just written) stay otherwise
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        else:
            out.append(str(resident_pages(f)))
    if out:
        print(" ".join(out))


if __name__ == "__main__":
    main()
