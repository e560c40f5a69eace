#!/usr/bin/env python3
"""fuse_latency.py: reads `perf script` output of the kernel's FUSE
tracepoints on stdin and prints, per request kind, how many there were and
how long each took from the kernel's send to the daemon's answer:

    perf record -e fuse:fuse_request_send -e fuse:fuse_request_end -a -o P -- CMD
    perf script -i P | tests/bench/fuse_latency.py

(tracefs must be mounted: mount -t tracefs nodev /sys/kernel/tracing.)
A request's time is the round trip a reader waits for when the request is
synchronous (LOOKUP, OPEN, READ); RELEASE is sent in the background."""
import collections
import re
import sys

LINE = re.compile(r"\s(\d+\.\d+):\s+fuse:fuse_request_(send|end):.*?req (\d+)(.*)")
OPCODE = re.compile(r"opcode \d+ \((\w+)\)")


def main():
    sent = {}
    took = collections.defaultdict(list)
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        t, kind, unique, rest = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        if kind == "send":
            op = OPCODE.search(rest)
            sent[unique] = (t, op.group(1) if op else "?")
        elif unique in sent:
            t0, op = sent.pop(unique)
            took[op].append(t - t0)
    print("%-14s %8s %10s %10s %10s" % ("request", "count", "mean us", "median us", "total s"))
    for op, times in sorted(took.items(), key=lambda kv: -sum(kv[1])):
        times.sort()
        print("%-14s %8d %10.1f %10.1f %10.3f" % (op, len(times), 1e6 * sum(times) / len(times),
                                                   1e6 * times[len(times) // 2], sum(times)))


if __name__ == "__main__":
    main()
