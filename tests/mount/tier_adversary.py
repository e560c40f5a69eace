#!/usr/bin/env python3
"""tier_adversary.py - someone on the job's network who reaches a tier
memcached and speaks its text protocol (no dlcache code, no libmemcached).

  keys PORT                      every dlcache key on the server, one a line
  tamper PORT OLD_KEYS           the keys not in OLD_KEYS (the victim
                                 snapshot's) are split in four: swapped in
                                 pairs of the same length, forged in the old
                                 frame ("DLT1", size, xxh3 of the forged body:
                                 recomputed), forged in the sealed frame
                                 without the key, and replayed from the
                                 snapshot of OLD_KEYS (same inode)
  seal PORT KEYFILE FRAME        a key holder: every value is replaced by
                                 other bytes of the same size, sealed with
                                 the key (FRAME new: "DLT2", AES-256-GCM as
                                 tier_seal.c; old: the xxh3 frame)

Prints one JSON object: how many values of each kind were replaced.
Its client functions (command, all_keys, get, put) are tier_epochs.py's too.
"""
import ctypes
import ctypes.util
import json
import os
import socket
import struct
import sys
import urllib.parse


def command(port, payload, until):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        data = b""
        while not data.endswith(until):
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        return data


def all_keys(port):
    dump = command(port, b"lru_crawler metadump all\r\n", b"END\r\n")
    return [urllib.parse.unquote(line.split()[0][4:]) for line in dump.decode().splitlines()
            if line.startswith("key=")]


def keys(port):
    return sorted(k for k in all_keys(port) if k.startswith("dlc1:"))


def get(port, key):
    reply = command(port, b"get %s\r\n" % key.encode(), b"END\r\n")
    if not reply.startswith(b"VALUE"):
        return None
    header, rest = reply.split(b"\r\n", 1)
    return rest[:int(header.split()[3])]


def put(port, key, value):
    store = b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(value), value)
    return command(port, store, b"\r\n").startswith(b"STORED")


def ino_of(key):
    return int(key.rsplit(":", 1)[1], 16)


def snapshot_of(key):
    return int(key.split(":")[1], 16)


_xxhash = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxhash.XXH3_64bits.restype = ctypes.c_uint64
_xxhash.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def old_frame(body):
    """The frame before sealing: magic "DLT1", version 1, size, xxh3."""
    return struct.pack("<IIQQ", 0x31544C44, 1, len(body), _xxhash.XXH3_64bits(body, len(body))) + body


def sealed(secret, snapshot, ino, body):
    """A value as tier_seal.c seals it, with the job's key."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"dlcache tier_key",
               info=b"dlcache tier values DLT2 AES-256-GCM").derive(secret)
    nonce = os.urandom(12)
    ad = b"DLT2" + struct.pack("<QIQ", snapshot, ino, len(body))
    return b"DLT2" + nonce + AESGCM(key).encrypt(nonce, body, ad)


def payload_size(value):
    """The sample's size held by a value of either frame."""
    return len(value) - (24 if value.startswith(b"DLT1") else 32)


def tamper(port, old_keys_file):
    old = set(open(old_keys_file).read().split())
    victims = [k for k in keys(port) if k not in old]
    by_ino = {ino_of(k): k for k in old}
    count = {"swapped": 0, "forged_old_frame": 0, "forged_new_frame": 0, "replayed": 0}
    quarter = len(victims) // 4
    swap, forge_old = victims[:quarter], victims[quarter:2 * quarter]
    forge_new, replay = victims[2 * quarter:3 * quarter], victims[3 * quarter:]
    values = {k: get(port, k) for k in swap}
    for a, b in zip(swap[0::2], swap[1::2]):
        if values[a] and values[b] and len(values[a]) == len(values[b]) and values[a] != values[b]:
            count["swapped"] += put(port, a, values[b]) + put(port, b, values[a])
    for k in forge_old:
        v = get(port, k)
        if v:
            count["forged_old_frame"] += put(port, k, old_frame(os.urandom(payload_size(v))))
    for k in forge_new:
        v = get(port, k)
        if v:
            count["forged_new_frame"] += put(port, k, b"DLT2" + os.urandom(len(v) - 4))
    for k in replay:
        source = by_ino.get(ino_of(k))
        v = get(port, source) if source else None
        if v and get(port, k):
            count["replayed"] += put(port, k, v)
    return count


def seal(port, key_file, frame):
    secret = open(key_file, "rb").read()
    count = {"sealed_wrong": 0}
    for k in keys(port):
        v = get(port, k)
        if not v:
            continue
        body = os.urandom(payload_size(v))
        forged = sealed(secret, snapshot_of(k), ino_of(k), body) if frame == "new" else old_frame(body)
        count["sealed_wrong"] += put(port, k, forged)
    return count


def main():
    what, port = sys.argv[1], int(sys.argv[2])
    if what == "keys":
        print("\n".join(keys(port)))
    elif what == "tamper":
        print(json.dumps(tamper(port, sys.argv[3])))
    elif what == "seal":
        print(json.dumps(seal(port, sys.argv[3], sys.argv[4])))
    else:
        sys.exit("unknown command " + what)


if __name__ == "__main__":
    main()
