#!/usr/bin/env python3
"""tier_slabs.py - how much of its -m one memcached fills with the tier's
values, and its CPU per GB of gets, under given memcached options.

  fill MB DIR [OPTIONS...]  starts memcached -m MB -M OPTIONS on a free
      loopback port, adds every file under DIR once (random order, SEED, a
      24-byte header as dlcache's frame) and prints the fill (stats bytes over
      limit_maxbytes), the values stored and refused, and the evictions.
  gets [OPTIONS...]  stores 200 random values of 55-165 KB, gets each 10
      times on one connection (every byte compared) and prints memcached's
      own CPU (rusage_user + rusage_system) per GB served: a count of the
      server's work that the client's speed and the machine's load barely move.

The memcached is started here and stopped by its PID.  Used for BENCHMARKS.md
("memcached's slabs in 2 KiB chunks"), e.g.:
  tests/bench/tier_slabs.py fill 36 /var/tmp/dlcache-bench-tier-1200/src -o slab_chunk_max=2048 -f 8
  tests/bench/tier_slabs.py gets -o slab_chunk_max=2048 -f 8
"""
import os
import random
import socket
import subprocess
import sys
import time


def start(mb, options):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    user = ["-u", "root"] if os.getuid() == 0 else []
    proc = subprocess.Popen(["memcached"] + user + ["-l", "127.0.0.1", "-p", str(port), "-U", "0",
                                                    "-m", str(mb), "-M", "-t", "2"] + options)
    for _ in range(100):
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            return proc, conn, conn.makefile("rb")
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("memcached did not start with options %s" % " ".join(options))


def stats(conn, reader):
    conn.sendall(b"stats\r\n")
    out = {}
    while True:
        line = reader.readline().decode().strip()
        if line == "END" or not line:
            return out
        _, key, value = line.split(" ", 2)
        out[key] = value


def fill(mb, root, options):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    random.Random(int(os.environ.get("SEED", "1"))).shuffle(files)
    proc, conn, reader = start(mb, options)
    stored = refused = 0
    try:
        for i, path in enumerate(files):
            with open(path, "rb") as f:
                value = b"\0" * 24 + f.read()
            conn.sendall(b"add dlc1:%016x:%x 0 0 %d\r\n" % (1, i, len(value)) + value + b"\r\n")
            if reader.readline().strip() == b"STORED":
                stored += 1
            else:
                refused += 1
        st = stats(conn, reader)
    finally:
        proc.terminate()
        proc.wait()
    print("%-32s fill %.3f of -m %d  stored %d refused %d  evictions %s" % (
        " ".join(options) or "(defaults)", int(st["bytes"]) / int(st["limit_maxbytes"]), mb,
        stored, refused, st["evictions"]))


def gets(options):
    rng = random.Random(1)
    values = [rng.randbytes(int(rng.uniform(55000, 165000))) for _ in range(200)]
    proc, conn, reader = start(128, options)
    served = 0
    try:
        for i, v in enumerate(values):
            conn.sendall(b"set k%d 0 0 %d\r\n" % (i, len(v)) + v + b"\r\n")
            if reader.readline().strip() != b"STORED":
                sys.exit("memcached refused a value of %d bytes" % len(v))
        st = stats(conn, reader)
        cpu0 = float(st["rusage_user"]) + float(st["rusage_system"])
        for _ in range(10):
            for i, v in enumerate(values):
                conn.sendall(b"get k%d\r\n" % i)
                length = int(reader.readline().split()[3])
                data = reader.read(length + 2)
                reader.readline()
                if data[:-2] != v:
                    sys.exit("memcached returned a wrong value for k%d" % i)
                served += length
        st = stats(conn, reader)
        cpu1 = float(st["rusage_user"]) + float(st["rusage_system"])
    finally:
        proc.terminate()
        proc.wait()
    print("%-32s %.3f GB served, memcached CPU %.3f s: %.3f s/GB" % (
        " ".join(options) or "(defaults)", served / 1e9, cpu1 - cpu0, (cpu1 - cpu0) / (served / 1e9)))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "fill":
        fill(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "gets":
        gets(sys.argv[2:])
    else:
        sys.exit("usage: tier_slabs.py fill MB DIR [MEMCACHED OPTIONS] | gets [MEMCACHED OPTIONS]")
