#!/usr/bin/env python3
"""soak.py - the readers, the load and the judge of tests/bench/soak.sh
(standard library only).

  soak.py manifest SRC OUT
      hashes every file under SRC (blake2b of each 1 MiB piece) into OUT, so
      that readers check every byte they read without reading the source.
  soak.py warmup MNT MANIFEST SECONDS
      reads files (3 threads the large ones, one the small ones, each in a
      shuffle) until the cache holds 90 % of its
      capacity or SECONDS pass, so that the run starts in the steady state
      (a full cache evicting) and its first minutes are not faster for
      filling an empty cache than its last.
  soak.py run --mount MNT --src SRC --manifest FILE --daemon-pid PID ...
      the supervisor: starts the worker processes below, sends signals to
      the interrupted ones, makes the source stall and recover (by creating
      and removing the flag file the daemon's LD_PRELOAD shim watches),
      samples the daemon's RSS and descriptors every second, prints a line
      per minute and a PASS/FAIL summary of the targets; exit status 0 when
      every target is met, 1 when one is missed, 3 on a hang (a call that
      has not returned after --hang seconds), 4 when the daemon died.
  soak.py worker ROLE ...   (started by run)
      stream     threads each stream whole large files (> cache_max_file,
                 read by blocks) in 1 MiB reads, one file after another
      small      threads each read every small file in their own shuffle
      announce   writes the next 512 small files of its shuffle to .control
                 as prefetch lines, then reads them in that order
      control    writes 200 score lines to .control every 0.2 s, and
                 "epoch N" every 30 s
      stats      reads .stats every 0.5 s and .cached (and .chunks on a
                 packed source) every 3 s
      interrupt  one thread (the main one) reads random files, small or
                 large; the supervisor sends it SIGUSR1 (its handler raises:
                 the read is abandoned and the next file begun) or SIGINT
                 (left at its default: the process dies mid-read and the
                 supervisor starts another)

Every open, read and .control write is timed: its start is published in a
shared slot (16 bytes: monotonic start time, file index) while it runs, so
the supervisor sees a call that never returns; a worker reports its
counters once a second on stdout ("bytes wrong errors interrupts calls
longest_us call file_index", the call being open, read or write), and each wrong piece on stderr at once ("WRONG n path
offset"), exact bytes counted against the source.
"""
import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time

PIECE = 1 << 20
SLOT = struct.Struct("dq")          # start (CLOCK_MONOTONIC s, 0 = idle), file index
VIRTUAL = {-2: ".stats", -3: ".cached", -4: ".control", -5: ".chunks"}


def digest(data):
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# ---------------------------------------------------------------- manifest

def manifest(src, out):
    files = []
    for d, dirs, names in os.walk(src):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(d, n)
            rel = os.path.relpath(p, src)
            pieces = []
            with open(p, "rb", buffering=0) as f:
                while True:
                    b = f.read(PIECE)
                    if not b:
                        break
                    pieces.append(digest(b))
            files.append([rel, os.path.getsize(p), pieces])
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"piece": PIECE, "files": files}, f)
    os.replace(tmp, out)
    print("%d files, %.0f MiB hashed" % (len(files), sum(f[1] for f in files) / 2**20))


# ------------------------------------------------------------------ warmup

def warmup(mount, manifest_path, seconds):
    with open(manifest_path) as f:
        files = json.load(f)["files"]
    sizes = sorted(x[1] for x in files)
    median_size = sizes[len(sizes) // 2]
    large = [x[0] for x in files if x[1] > 4 * median_size]
    small = [x[0] for x in files if x[1] <= 4 * median_size]
    random.Random(0).shuffle(large)
    random.Random(0).shuffle(small)
    stop = time.monotonic() + seconds
    done = threading.Event()
    lock = threading.Lock()
    queues = {"large": iter(large * 4), "small": iter(small * 4)}
    read = [0]

    def reader(kind):
        while not done.is_set() and time.monotonic() < stop:
            with lock:
                name = next(queues[kind], None)
            if name is None:
                return
            try:
                with open(os.path.join(mount, name), "rb", buffering=0) as f:
                    while not done.is_set():
                        b = f.read(PIECE)
                        if not b:
                            break
                        with lock:
                            read[0] += len(b)
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
    threads = [threading.Thread(target=reader, args=(kind,), daemon=True)
               for kind in ("large", "large", "large", "small")]
    for t in threads:
        t.start()
    start, cache = time.monotonic(), {}
    while time.monotonic() < stop and any(t.is_alive() for t in threads):
        time.sleep(1)
        with open(os.path.join(mount, ".stats"), "rb", buffering=0) as f:
            cache = json.loads(f.read())["cache"]
        if cache["bytes"] >= 0.9 * cache["capacity"]:
            break
    done.set()
    for t in threads:
        t.join(30)
    print("warm-up: %.0f MiB read in %.0f s; the cache holds %.0f of %.0f MiB" % (
        mib(read[0]), time.monotonic() - start, mib(cache.get("bytes", 0)), mib(cache.get("capacity", 0))),
        flush=True)


# ------------------------------------------------------------------ worker

class Interrupted(Exception):
    pass


class Worker:
    def __init__(self, a):
        self.a = a
        self.mount, self.src = a.mount, a.src
        with open(a.manifest) as f:
            self.files = json.load(f)["files"]
        self.large = [i for i, f in enumerate(self.files) if f[1] > a.max_file]
        self.small = [i for i, f in enumerate(self.files) if f[1] <= a.max_file]
        fd = os.open(a.slots, os.O_RDWR)
        self.slots = mmap.mmap(fd, 0)
        os.close(fd)
        self.lock = threading.Lock()
        self.bytes = self.wrong = self.errors = self.interrupts = self.calls = 0
        self.longest, self.longest_call = 0.0, "- 0"
        self.logged = 0
        self.rng = random.Random(a.seed)

    def log(self, text):
        if self.logged < 50:
            self.logged += 1
            sys.stderr.write("%s[%d]: %s\n" % (self.a.role, os.getpid(), text))
            sys.stderr.flush()

    # One timed call: published in the slot while it runs.
    def timed(self, slot, index, call, *args):
        off = slot * SLOT.size
        start = time.monotonic()
        SLOT.pack_into(self.slots, off, start, index)
        outcome = "raised"
        try:
            result = call(*args)
            outcome = len(result) if isinstance(result, bytes) else result
            return result
        except OSError as e:
            outcome = errno.errorcode.get(e.errno, e.errno)
            raise
        finally:
            took = time.monotonic() - start
            if took > self.a.slow_log_seconds and self.a.slow_log:
                self.log_slow(start, took, call, index, args, outcome)
            SLOT.pack_into(self.slots, off, 0.0, 0)
            with self.lock:
                self.calls += 1
                if took > self.longest:
                    self.longest, self.longest_call = took, "%s %d" % (call.__name__, index)

    # One call slower than --slow-log-seconds, appended to --slow-log with
    # its start (CLOCK_MONOTONIC, the clock of the kernel's trace_clock
    # mono), the thread (the pid the daemon and the kernel's fuse
    # tracepoints see) and what it returned.
    def log_slow(self, start, took, call, index, args, outcome):
        where = ""
        if call is os.read:
            try:
                where = " at %d" % (os.lseek(args[0], 0, os.SEEK_CUR) - (outcome if isinstance(outcome, int) else 0))
            except OSError:
                pass
        name = self.files[index][0] if index >= 0 else VIRTUAL.get(index, "-")
        with open(self.a.slow_log, "a") as f:
            f.write("%.3f %.3f tid %d %s %s%s -> %s\n" % (start, took, threading.get_native_id(),
                                                          call.__name__, name, where, outcome))

    def count_error(self, what, e):
        with self.lock:
            self.errors += 1
        self.log("%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)))

    def report_loop(self):
        while True:
            time.sleep(1)
            self.report()

    def report(self):
        with self.lock:
            line = "%d %d %d %d %d %d %s\n" % (self.bytes, self.wrong, self.errors, self.interrupts,
                                               self.calls, int(self.longest * 1e6), self.longest_call)
            self.bytes = self.wrong = self.errors = self.interrupts = self.calls = 0
            self.longest, self.longest_call = 0.0, "- 0"
        os.write(1, line.encode())

    # The exact number of wrong bytes of a piece, against the source.
    def wrong_bytes(self, rel, offset, got):
        with open(os.path.join(self.src, rel), "rb") as f:
            f.seek(offset)
            want = f.read(PIECE)
        n = abs(len(want) - len(got))
        for i in range(0, min(len(want), len(got)), 4096):
            x, y = got[i:i + 4096], want[i:i + 4096]
            if x != y:
                n += sum(1 for p, q in zip(x, y) if p != q)
        return n

    def check(self, index, k, piece):
        rel, size, pieces = self.files[index]
        if k < len(pieces) and digest(piece) == pieces[k]:
            return
        n = self.wrong_bytes(rel, k * PIECE, piece) or len(piece)
        sys.stderr.write("WRONG %d %s %d\n" % (n, rel, k * PIECE))
        sys.stderr.flush()
        with self.lock:
            self.wrong += n
        self.report()

    # Reads file index whole through the mount, checking each piece.
    def read_file(self, slot, index):
        rel, size, _ = self.files[index]
        path = os.path.join(self.mount, rel)
        try:
            fd = self.timed(slot, index, os.open, path, os.O_RDONLY)
        except OSError as e:
            self.count_error("open " + rel, e)
            return
        try:
            buf, k, got = bytearray(), 0, 0
            while True:
                b = self.timed(slot, index, os.read, fd, PIECE)
                got += len(b)
                with self.lock:
                    self.bytes += len(b)
                buf += b
                while len(buf) >= PIECE or (not b and buf):
                    self.check(index, k, bytes(buf[:PIECE]))
                    del buf[:PIECE]
                    k += 1
                if not b:
                    break
            if got < size:
                sys.stderr.write("WRONG %d %s %d (short file)\n" % (size - got, rel, got))
                sys.stderr.flush()
                with self.lock:
                    self.wrong += size - got
            # The next read of this file goes to the daemon, not the page cache.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            self.count_error("read " + rel, e)
        finally:
            os.close(fd)

    def read_virtual(self, slot, name, index):
        try:
            fd = self.timed(slot, index, os.open, os.path.join(self.mount, name), os.O_RDONLY)
        except OSError as e:
            if e.errno != errno.ENOENT:
                self.count_error("open " + name, e)
            return b""
        parts = []
        try:
            while True:
                b = self.timed(slot, index, os.read, fd, PIECE)
                if not b:
                    break
                parts.append(b)
        except OSError as e:
            self.count_error("read " + name, e)
        finally:
            os.close(fd)
        return b"".join(parts)

    def write_control(self, slot, text):
        try:
            fd = self.timed(slot, -4, os.open, os.path.join(self.mount, ".control"), os.O_WRONLY)
        except OSError as e:
            self.count_error("open .control", e)
            return
        try:
            data = text.encode()
            while data:
                n = self.timed(slot, -4, os.write, fd, data[:65536])
                data = data[n:]
        except OSError as e:
            self.count_error("write .control", e)
        finally:
            os.close(fd)

    # Roles: each runs forever in its thread (slot = its slot number).
    def stream(self, slot):
        rng = random.Random(self.a.seed * 1000 + slot)
        while True:
            self.read_file(slot, rng.choice(self.large))

    def small_files(self, slot):
        rng = random.Random(self.a.seed * 1000 + slot)
        order = list(self.small)
        while True:
            rng.shuffle(order)
            for i in order:
                self.read_file(slot, i)

    def announce(self, slot):
        rng = random.Random(self.a.seed * 1000 + slot)
        order = list(self.small)
        while True:
            rng.shuffle(order)
            for at in range(0, len(order), 512):
                batch = order[at:at + 512]
                self.write_control(slot, "".join("prefetch %s\n" % self.files[i][0] for i in batch))
                for i in batch:
                    self.read_file(slot, i)

    def control(self, slot):
        rng = random.Random(self.a.seed * 1000 + slot)
        epoch, next_epoch = 1, time.monotonic() + 30
        while True:
            lines = ["%.4f %s\n" % (rng.random(), self.files[rng.randrange(len(self.files))][0])
                     for _ in range(200)]
            if time.monotonic() >= next_epoch:
                epoch += 1
                next_epoch += 30
                lines.append("epoch %d\n" % epoch)
            self.write_control(slot, "".join(lines))
            time.sleep(0.2)

    def stats(self, slot):
        n = 0
        while True:
            data = self.read_virtual(slot, ".stats", -2)
            if data:
                try:
                    json.loads(data)
                except ValueError:
                    self.log(".stats is not JSON: %r" % data[:80])
                    with self.lock:
                        self.errors += 1
            if n % 6 == 0:
                self.read_virtual(slot, ".cached", -3)
                self.read_virtual(slot, ".chunks", -5)
            n += 1
            time.sleep(0.5)

    # After an interruption: the descriptor of the mount the exception may
    # have cut loose between open(2) and its use is closed, or the daemon
    # would count this reader's leak as its own.
    def close_mount_fds(self):
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + fd).startswith(self.mount + "/"):
                    os.close(int(fd))
            except OSError:
                pass

    def interrupt(self, slot):
        def ring(*_):
            raise Interrupted
        signal.signal(signal.SIGUSR1, ring)
        rng = random.Random(self.a.seed * 1000 + slot + os.getpid())
        while True:
            index = rng.choice(self.large if self.large and rng.random() < 0.5 else self.small)
            try:
                self.read_file(slot, index)
            except Interrupted:
                SLOT.pack_into(self.slots, slot * SLOT.size, 0.0, 0)
                self.close_mount_fds()
                with self.lock:
                    self.interrupts += 1

    def run(self):
        role = {"stream": self.stream, "small": self.small_files, "announce": self.announce,
                "control": self.control, "stats": self.stats, "interrupt": self.interrupt}[self.a.role]
        threading.Thread(target=self.report_loop, daemon=True).start()
        if self.a.role == "interrupt":
            role(self.a.slot_base)      # signals reach the main thread only
            return
        threads = [threading.Thread(target=role, args=(self.a.slot_base + i,), daemon=True)
                   for i in range(self.a.threads)]
        for t in threads:
            t.start()
        while True:
            time.sleep(3600)


# -------------------------------------------------------------- supervisor

def mib(n):
    return n / 2**20


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else 0


class Supervisor:
    def __init__(self, a):
        self.a = a
        self.pid = a.daemon_pid
        self.duration = a.minutes * 60.0
        self.specs = []             # [role, threads, slot_base]
        slot = 0
        plan = [("stream", a.streams, 16), ("small", a.small_readers, 4), ("announce", 1, 1),
                ("control", 1, 1), ("stats", 1, 1)] + [("interrupt", 1, 1)] * a.interrupted
        for role, count, per in plan:
            while count > 0:
                n = min(per, count)
                self.specs.append([role, n, slot])
                slot += n
                count -= n
        self.nslots = slot
        self.slot_role = {}
        for role, n, base in self.specs:
            for s in range(base, base + n):
                self.slot_role[s] = role
        self.slots_path = os.path.join(a.out, "slots")
        with open(self.slots_path, "wb") as f:
            f.write(b"\0" * (SLOT.size * max(self.nslots, 1)))
        fd = os.open(self.slots_path, os.O_RDWR)
        self.slots = mmap.mmap(fd, 0)
        os.close(fd)
        with open(a.manifest) as f:
            self.names = [x[0] for x in json.load(f)["files"]]
        self.workers = {}           # pid -> (Popen, spec index)
        self.sel = selectors.DefaultSelector()
        self.log = open(os.path.join(a.out, "workers.log"), "ab")
        self.rng = random.Random(a.seed)
        self.seconds = []           # per second: bytes
        self.rss = []               # per second: (t, rss bytes)
        self.fds = []               # per second: (t, fds)
        self.minute = self.new_minute()
        self.totals = {"bytes": 0, "wrong": 0, "errors": 0, "interrupts": 0, "calls": 0,
                       "longest": 0.0, "signals": 0, "restarts": 0, "stalls": 0, "rss": 0}
        self.lines = []
        self.minute_from = 0        # self.seconds[minute_from:] is this minute
        self.second_bytes = 0
        self.second_roles = {}
        self.roles = []             # per second: {role: bytes}

    @staticmethod
    def new_minute():
        return {"bytes": 0, "wrong": 0, "errors": 0, "interrupts": 0, "calls": 0,
                "longest": 0.0, "longest_role": "-", "rss": 0, "fds": 0, "signals": 0, "stalls": 0}

    def note_slow_log(self, what):
        if self.a.slow_log:
            with open(self.a.slow_log, "a") as f:
                f.write("%.3f %s\n" % (time.monotonic(), what))

    def spawn(self, index):
        role, n, base = self.specs[index]
        a = self.a
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", role,
                              "--threads", str(n), "--slot-base", str(base), "--slots", self.slots_path,
                              "--mount", a.mount, "--src", a.src, "--manifest", a.manifest,
                              "--max-file", str(a.max_file), "--seed", str(self.rng.randrange(1 << 30)),
                              "--slow-log", a.slow_log, "--slow-log-seconds", str(a.slow_log_seconds)],
                             stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        os.set_blocking(p.stdout.fileno(), False)
        self.sel.register(p.stdout, selectors.EVENT_READ, (p, index, bytearray()))
        self.workers[p.pid] = (p, index)
        with open(os.path.join(a.out, "workers.pids"), "a") as f:
            f.write("%d\n" % p.pid)

    def drain(self, timeout):
        for key, _ in self.sel.select(timeout):
            p, index, buf = key.data
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except BlockingIOError:
                continue
            if not data:
                self.sel.unregister(key.fileobj)
                key.fileobj.close()
                continue
            buf += data
            while b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                buf[:] = rest
                self.account(self.specs[index][0], line)

    def account(self, role, line):
        try:
            fields = line.decode().split()
            b, w, e, i, c, longest, index = (int(x) for x in fields[:6] + fields[7:8])
            call = fields[6]
        except (ValueError, IndexError, UnicodeDecodeError):
            return
        m = self.minute
        m["bytes"] += b
        m["wrong"] += w
        m["errors"] += e
        m["interrupts"] += i
        m["calls"] += c
        self.second_bytes += b
        self.second_roles[role] = self.second_roles.get(role, 0) + b
        if longest / 1e6 > m["longest"]:
            m["longest"], m["longest_role"] = longest / 1e6, "%s %s %s" % (
                role, call, VIRTUAL.get(index) or self.names[index])

    def reap(self):
        for pid, (p, index) in list(self.workers.items()):
            rc = p.poll()
            if rc is None:
                continue
            del self.workers[pid]
            role, n, base = self.specs[index]
            # Its calls died with it: no stale start for the hang watch, and
            # its successor is not taken for busy before its handler is set.
            for s in range(base, base + n):
                SLOT.pack_into(self.slots, s * SLOT.size, 0.0, 0)
            if not (role == "interrupt" and rc == -signal.SIGINT):
                self.log.write(b"supervisor: %s worker %d exited with %d; started again\n" % (
                    role.encode(), pid, rc))
                self.log.flush()
                self.minute["errors"] += 1
            self.totals["restarts"] += 1
            self.spawn(index)

    # The calls in flight now: [(age, slot, file index)], oldest first.
    def in_flight(self):
        now = time.monotonic()
        out = []
        for s in range(self.nslots):
            start, index = SLOT.unpack_from(self.slots, s * SLOT.size)
            if start:
                out.append((now - start, s, index))
        out.sort(reverse=True)
        return out

    def daemon_sample(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return None
        n = 0
        try:
            for fd in os.listdir("/proc/%d/fd" % self.pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (self.pid, fd))
                except OSError:
                    continue
                # libfuse's per-thread /dev/fuse clones and splice pipes are
                # bounded by the thread count; they are not what leaks.
                if target != "/dev/fuse" and not target.startswith("pipe:"):
                    n += 1
        except OSError:
            return None
        return rss, n

    def stats_snapshot(self, timeout=3.0):
        """.stats as a dict, or None when it does not answer within timeout."""
        result = {}

        def get():
            try:
                with open(os.path.join(self.a.mount, ".stats"), "rb", buffering=0) as f:
                    result["v"] = json.loads(f.read())
            except (OSError, ValueError) as e:
                result["e"] = e
        t = threading.Thread(target=get, daemon=True)
        t.start()
        t.join(timeout)
        return result.get("v")

    def describe(self, slot, index):
        what = VIRTUAL.get(index) or (self.names[index] if 0 <= index < len(self.names) else "?")
        return "%s#%d %s" % (self.slot_role.get(slot, "?"), slot, what)

    def print_line(self, text):
        print(text, flush=True)
        self.lines.append(text)

    def minute_line(self, number, flight):
        m = self.minute
        longest, who = m["longest"], m["longest_role"]
        if flight and flight[0][0] > longest:
            longest, who = flight[0][0], self.describe(flight[0][1], flight[0][2]) + " (in flight)"
        m["longest"], m["longest_role"] = longest, who
        mem = ""
        st = self.stats_snapshot(2.0)
        if st and isinstance(st.get("memory"), dict):
            mm = st["memory"]
            mem = "  budget %.0f/%.0f MiB waits %s" % (mib(mm.get("used", 0)), mib(mm.get("limit", 0)),
                                                       mm.get("waits", "?"))
        elif st is None:
            mem = "  .stats does not answer"
        self.print_line("%4d %9.0f %7.1f %6d %6d %5d %5d %7.0f/%-5.0f %5d %8.2f %s%s" % (
            number, mib(m["bytes"]), mib(m["bytes"]) / max(1, len(self.seconds) - self.minute_from),
            m["wrong"], m["errors"],
            m["interrupts"], m["signals"], mib(m["rss"]), mib(self.a.memory_limit), m["fds"], longest,
            who, mem))

    def hang(self, flight):
        stuck = [f for f in flight if f[0] > self.a.hang]
        by_role = {}
        for age, slot, index in stuck:
            by_role[self.slot_role[slot]] = by_role.get(self.slot_role[slot], 0) + 1
        self.print_line("")
        self.print_line("HANG: %d of %d reader threads stuck in one call for more than %.0f s (%s); "
                        "the oldest for %.0f s." % (
                            len(stuck), self.nslots, self.a.hang,
                            ", ".join("%d %s" % (n, r) for r, n in sorted(by_role.items())), stuck[0][0]))
        for age, slot, index in stuck[:8]:
            self.print_line("  %6.1f s  %s" % (age, self.describe(slot, index)))
        if len(stuck) > 8:
            self.print_line("  ... and %d more" % (len(stuck) - 8))
        st = self.stats_snapshot(3.0)
        if st is None:
            self.print_line("  .stats does not answer within 3 s")
        else:
            mm = st.get("memory", {})
            self.print_line("  .stats: memory used %.0f of %.0f MiB, waits %s; source_reads %s" % (
                mib(mm.get("used", 0)), mib(mm.get("limit", 0)), mm.get("waits", "?"),
                json.dumps(st.get("source_reads", "?"))))
        self.stacks()

    # Where the daemon's threads wait, while the readers still wait on them.
    def stacks(self):
        where = {}
        for tid in os.listdir("/proc/%d/task" % self.pid):
            try:
                with open("/proc/%d/task/%s/wchan" % (self.pid, tid)) as f:
                    w = f.read().strip() or "-"
                with open("/proc/%d/task/%s/comm" % (self.pid, tid)) as f:
                    c = f.read().strip()
            except OSError:
                continue
            where[(w, c)] = where.get((w, c), 0) + 1
        self.print_line("  daemon threads by kernel wait channel and name:")
        for (w, c), n in sorted(where.items(), key=lambda x: -x[1])[:10]:
            self.print_line("  %5d  %-28s %s" % (n, w, c))
        try:
            out = subprocess.run(["gdb", "-p", str(self.pid), "-batch", "-ex", "thread apply all bt 10"],
                                 capture_output=True, text=True, timeout=90).stdout
        except (OSError, subprocess.TimeoutExpired):
            return
        frames = {}
        for line in out.splitlines():
            if line.startswith("#"):
                f = line.split(" in ", 1)[-1] if " in " in line else line.split(None, 1)[-1]
                f = f.split(" (")[0]
                frames[f] = frames.get(f, 0) + 1
        self.print_line("  daemon user stack frames, most shared first (gdb):")
        for f, n in sorted(frames.items(), key=lambda x: -x[1])[:16]:
            self.print_line("  %5d  %s" % (n, f))

    def stop_workers(self):
        for pid, (p, _) in self.workers.items():
            try:
                p.kill()
            except OSError:
                pass
        for pid, (p, _) in self.workers.items():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                self.log.write(b"supervisor: worker %d did not die within 10 s of SIGKILL\n" % pid)

    # The stall schedule, the same in the first and the last fifth of the
    # run: each fifth holds whole cycles of about a minute, each with a short
    # stall (the source comes back before source_timeout) at a quarter and a
    # long one (source_timeout + 2 s: the reads waiting fail with EIO, then
    # the source recovers) at 60 %.  Fifths under 40 s get one stall each,
    # at their middle: short in the 1st, 3rd and 5th, long in the others.
    def stall_plan(self):
        if self.a.no_stall or not self.a.flag:
            return []
        fifth = self.duration / 5
        long_stall = self.a.source_timeout + 2
        if fifth < 40:
            return [(k * fifth + 0.4 * fifth, self.a.stall_short if k % 2 == 0 else long_stall)
                    for k in range(5)]
        cycles = max(1, round(fifth / 60))
        cycle = fifth / cycles
        plan = []
        for c in range(cycles * 5):
            t0 = c * cycle
            plan.append((t0 + 0.25 * cycle, self.a.stall_short))
            plan.append((t0 + 0.6 * cycle, long_stall))
        return plan

    def run(self):
        a = self.a
        open(os.path.join(a.out, "workers.pids"), "w").close()
        for i in range(len(self.specs)):
            self.spawn(i)
        interrupters = [i for i, s in enumerate(self.specs) if s[0] == "interrupt"]
        plan = self.stall_plan()
        self.print_line("soak: %.0f min; %d block streams, %d small-file readers, 1 announced reader, "
                        "1 .control writer, 1 .stats/.cached reader, %d interrupted readers; "
                        "memory_limit %.0f MiB, source_timeout %.0f s, %d source stalls" % (
                            a.minutes, a.streams, a.small_readers, a.interrupted, mib(a.memory_limit),
                            a.source_timeout, len(plan)))
        # The warm-up: the same load, without stalls, not counted (but
        # watched for hangs, and wrong bytes always count), so that the
        # first measured minutes hold the cache's steady mix of files.
        measuring = a.warmup <= 0
        if not measuring:
            self.print_line("(the first %.0f s under this load are a warm-up, not counted)" % a.warmup)
        self.print_line("%4s %9s %7s %6s %6s %5s %5s %13s %5s %8s %s" % (
            "min", "MiB", "MiB/s", "wrong", "errors", "intr", "sigs", "rss/limit MiB", "fds",
            "longest", "(who)"))
        start = time.monotonic()
        next_second = start + 1
        next_minute = start + 60
        next_signal = start + self.rng.uniform(0.3, 1.0)
        stall_end = None
        minute_no = 0
        status = None
        if not measuring:
            plan, kept_plan = [], plan
        while status is None:
            now = time.monotonic()
            self.drain(max(0.0, min(0.1, next_second - now)))
            now = time.monotonic()
            elapsed = now - start
            # The source stalls and recovers.
            if stall_end is None and plan and elapsed >= plan[0][0]:
                at, length = plan.pop(0)
                open(a.flag, "w").close()
                stall_end = now + length
                self.note_slow_log("stall of %.0f s begins" % length)
                self.minute["stalls"] += 1
                self.totals["stalls"] += 1
            if stall_end is not None and now >= stall_end:
                os.unlink(a.flag)
                self.note_slow_log("stall ends")
                stall_end = None
            # A signal to one interrupted reader in the middle of a call
            # (so in its reading loop, with its handler installed); none
            # busy: look again in 50 ms.
            if interrupters and now >= next_signal:
                busy = [pid for pid, (p, i) in self.workers.items() if i in interrupters
                        and SLOT.unpack_from(self.slots, self.specs[i][2] * SLOT.size)[0]]
                if busy:
                    sig = signal.SIGINT if self.rng.random() < 0.3 else signal.SIGUSR1
                    try:
                        os.kill(self.rng.choice(busy), sig)
                        self.minute["signals"] += 1
                    except ProcessLookupError:
                        pass
                    next_signal = now + self.rng.uniform(0.2, 1.0)
                else:
                    next_signal = now + 0.05
            self.reap()
            if now < next_second:
                continue
            next_second += 1
            if not measuring and elapsed >= a.warmup:
                measuring = True
                self.reset_counts()
                start, plan = now, kept_plan
                next_second, next_minute = now + 1, now + 60
                continue
            # Once a second: the daemon, the calls in flight.
            self.seconds.append(self.second_bytes)
            self.roles.append(self.second_roles)
            self.second_bytes, self.second_roles = 0, {}
            sample = self.daemon_sample()
            if sample is None:
                self.print_line("")
                self.print_line("DAEMON GONE: process %d exited %.0f s into the run." % (self.pid, elapsed))
                status = 4
                break
            rss, fds = sample
            self.rss.append((elapsed, rss))
            self.fds.append((elapsed, fds))
            self.minute["rss"] = max(self.minute["rss"], rss)
            self.minute["fds"] = max(self.minute["fds"], fds)
            flight = self.in_flight()
            if flight and flight[0][0] > a.hang:
                minute_no += measuring
                self.minute_line(minute_no, flight)
                self.close_minute()
                self.hang(flight)
                status = 3
                break
            if not measuring:
                continue
            if now >= next_minute or elapsed >= self.duration:
                minute_no += 1
                self.minute_line(minute_no, flight)
                self.close_minute()
                next_minute += 60
            if elapsed >= self.duration:
                status = 0
        if os.path.exists(a.flag):
            os.unlink(a.flag)
        self.stop_workers()
        self.drain(0)
        return self.judge(status)

    def reset_counts(self):
        self.seconds, self.roles, self.rss, self.fds = [], [], [], []
        self.second_bytes, self.second_roles = 0, {}
        self.minute, self.minute_from = self.new_minute(), 0
        for k in self.totals:
            self.totals[k] = 0

    def close_minute(self):
        m = self.minute
        for k in ("bytes", "wrong", "errors", "interrupts", "calls", "signals"):
            self.totals[k] += m[k]
        if m["longest"] > self.totals["longest"]:
            self.totals["longest"], self.totals["longest_role"] = m["longest"], m["longest_role"]
        self.minute = self.new_minute()
        self.minute_from = len(self.seconds)

    def wrong_from_log(self):
        n = 0
        self.log.flush()
        with open(os.path.join(self.a.out, "workers.log"), "rb") as f:
            for line in f:
                if line.startswith(b"WRONG "):
                    n += int(line.split()[1])
        return n

    def judge(self, status):
        a, t = self.a, self.totals
        results = []

        info = set(filter(None, a.info.split(",")))

        def target(key, name, ok, detail):
            judged = key not in info
            if judged:
                results.append(ok)
            self.print_line("%s  %-38s %s" % ("PASS" if ok else "FAIL" if judged else "info", name, detail))

        wrong = max(t["wrong"], self.wrong_from_log())
        self.print_line("")
        self.print_line("served %.0f MiB in %d s (%.1f MiB/s); %d calls, %d errors (EIO/timeouts while the "
                        "source stalls are expected), %d signals, %d interrupted reads, %d readers "
                        "started again, %d stalls" % (
                            mib(t["bytes"]), len(self.seconds), mib(t["bytes"]) / max(1, len(self.seconds)),
                            t["calls"], t["errors"], t["signals"], t["interrupts"], t["restarts"], t["stalls"]))
        if status == 3:
            target("hang", "no hang", False, "a reader waited more than %.0f s in one call (see HANG above)" % a.hang)
        elif status == 4:
            target("hang", "the daemon runs", False, "it exited during the run")
        target("wrong", "wrong bytes", wrong == 0, "%d (every byte read checked against the source)" % wrong)
        peak = max((r for _, r in self.rss), default=0)
        bound = a.memory_limit + a.rss_overhead
        target("rss", "RSS within memory_limit + overhead", peak <= bound,
               "peak %.0f MiB <= %.0f + %.0f MiB" % (mib(peak), mib(a.memory_limit), mib(a.rss_overhead)))
        # Medians of the per-second counts: the files open at one instant
        # come and go with the readers; a leak moves the median.
        end = self.fds[-1][0] if self.fds else 0
        span = min(60.0, end / 2)
        first = median([n for s, n in self.fds if s <= span])
        last = median([n for s, n in self.fds if s > end - span])
        slack = max(a.fd_slack, first // 10)
        target("fds", "descriptors flat", last <= first + slack,
               "median of the last %.0f s %d, of the first %d (slack %d)" % (span, last, first, slack))
        limit = a.source_timeout + 1
        target("wait", "longest wait <= source_timeout + 1 s", t["longest"] <= limit,
               "%.2f s (%s) <= %.0f s" % (t["longest"], t.get("longest_role", "-"), limit))
        n = len(self.seconds)
        window = 300 if n >= 1500 else n // 5
        if window >= 1:
            head, tail = sum(self.seconds[:window]), sum(self.seconds[n - window:])
            ratio = tail / head if head else 0.0
            target("throughput", "throughput, last vs first %s" % ("5 min" if window == 300 else "fifth"),
                   status == 0 and ratio >= 0.9,
                   "%.1f vs %.1f MiB/s (%.2fx; a fall of more than 10%% fails)" % (
                       mib(tail) / window, mib(head) / window, ratio))
            by = {}
            for k, part in ((0, self.roles[:window]), (1, self.roles[n - window:])):
                for sec in part:
                    for role, b in sec.items():
                        by.setdefault(role, [0, 0])[k] += b
            self.print_line("      by reader, first -> last: " + ", ".join(
                "%s %.1f -> %.1f" % (role, mib(f) / window, mib(l) / window) for role, (f, l) in sorted(by.items())))
        ok = all(results)
        self.print_line("soak: %s" % ("PASS" if ok else "FAIL"))
        if status in (3, 4):
            return status
        return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest")
    m.add_argument("src")
    m.add_argument("out")
    u = sub.add_parser("warmup")
    u.add_argument("mount")
    u.add_argument("manifest")
    u.add_argument("seconds", type=float)
    w = sub.add_parser("worker")
    w.add_argument("role")
    for name in ("--mount", "--src", "--manifest", "--slots"):
        w.add_argument(name, required=True)
    w.add_argument("--threads", type=int, default=1)
    w.add_argument("--slot-base", type=int, default=0)
    w.add_argument("--max-file", type=int, required=True)
    w.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    for parser in (w, r):
        parser.add_argument("--slow-log", default="", help="append calls slower than --slow-log-seconds here")
        parser.add_argument("--slow-log-seconds", type=float, default=5.0)
    for name in ("--mount", "--src", "--manifest", "--out"):
        r.add_argument(name, required=True)
    r.add_argument("--daemon-pid", type=int, required=True)
    r.add_argument("--flag", default="", help="the stall shim's flag file")
    r.add_argument("--minutes", type=float, default=30)
    r.add_argument("--max-file", type=int, required=True, help="cache_max_file in bytes")
    r.add_argument("--memory-limit", type=int, required=True)
    r.add_argument("--rss-overhead", type=int, default=128 << 20)
    r.add_argument("--source-timeout", type=float, required=True)
    r.add_argument("--streams", type=int, default=64)
    r.add_argument("--small-readers", type=int, default=4)
    r.add_argument("--interrupted", type=int, default=4)
    r.add_argument("--stall-short", type=float, default=3)
    r.add_argument("--no-stall", action="store_true")
    r.add_argument("--hang", type=float, default=30)
    r.add_argument("--warmup", type=float, default=0, help="seconds of load before the counted run")
    r.add_argument("--fd-slack", type=int, default=16)
    r.add_argument("--info", default="",
                   help="targets printed but not judged, comma-separated: wrong, rss, fds, wait, throughput")
    r.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.cmd == "manifest":
        manifest(a.src, a.out)
    elif a.cmd == "warmup":
        warmup(a.mount, a.manifest, a.seconds)
    elif a.cmd == "worker":
        if a.role == "interrupt":
            # ^C kills (the default action); SIGUSR1 is ignored until the
            # reading loop installs its handler.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        Worker(a).run()
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        sup = Supervisor(a)
        try:
            sys.exit(sup.run())
        finally:
            sup.stop_workers()


if __name__ == "__main__":
    main()
