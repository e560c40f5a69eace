#!/usr/bin/env python3
"""fake_s3.py - a small S3 server for the tests and benchmarks (standard library only).

Serves ROOT/BUCKET/KEY path-style over HTTP/1.1 with keep-alive: ListObjectsV2
(prefix, delimiter, continuation-token, max-keys), GET (Range, If-Match) and
HEAD.  An object's ETag is the quoted MD5 of its bytes, so rewriting a file
under ROOT replaces the object (and If-Match with the old ETag gets 412).

Listings honour encoding-type=url as S3 does (keys, prefixes URL-encoded, an
<EncodingType> element after the keys); without it a key goes out raw, so a key
with a byte XML 1.0 cannot carry makes the page unparsable, as on S3.

What S3 itself does not offer, for the tests:
  --latency MS         every request waits MS milliseconds first (a WAN's round trip)
  --access-key AK      requests must be signed with key AK (else 403 InvalidAccessKeyId);
                       the signature itself is not checked (s3rver checks SigV4)
  --session-token-file F  requests must carry x-amz-security-token equal to F's
                       content (else 403 InvalidToken)
  --skew S             the server's clock runs S seconds off this machine's: its Date
                       header shows it, and a request signed more than 15 minutes away
                       from it gets 403 RequestTimeTooSkewed, as on S3
  --page-size N        at most N keys per listing page
  A faulty server or proxy, each a flag (or POST /_fake/fault?name=NAME&on=0|1):
  --wrong-range        a ranged GET gets 206 with the range 64 bytes later than asked
                       (Content-Range and bytes agree with each other, not with the ask)
  --range-as-200       a ranged GET gets the asked bytes, but with status 200
  --full-body-for-range  a ranged GET gets the whole object with status 200
  --bad-etag           If-Match ignored: other bytes, with their own ETag
  --cut-body           the first answer to each GET (key and range) stops at half its
                       Content-Length and the connection closes
  --cut-body-unframed  the same with no Content-Length (a close-delimited body)
  --reset-mid-body     the first answer to each GET sends half its body, then a reset
  --truncated-listing-no-token  a truncated page has no NextContinuationToken
  --long-token N       continuation tokens are N bytes long
  admin requests on /_fake/ (never counted):
    GET  /_fake/stats            {"LIST": n, "GET": n, "HEAD": n, "other": n, "ranges": [...]}
    POST /_fake/fail?status=503&count=N   the next N requests answer status (SlowDown)
    POST /_fake/reset?count=N    the next N requests have their connection reset
    POST /_fake/latency?ms=N     change the latency
    POST /_fake/skew?s=N         change the clock's offset
    POST /_fake/fault?name=NAME&on=1      turn a faulty-server flag on (on=0: off)
    POST /_fake/clear            zero the counters
The port is written to --port-file once the server listens (port 0 picks one).
"""
import argparse
import calendar
import email.utils
import hashlib
import html
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


FAULTS = ("wrong-range", "range-as-200", "full-body-for-range", "bad-etag", "cut-body",
          "cut-body-unframed", "reset-mid-body", "truncated-listing-no-token")


class State:
    def __init__(self, root, latency_ms, access_key):
        self.root = os.path.realpath(root)
        self.latency = latency_ms / 1000.0
        self.access_key = access_key
        self.session_token = None
        self.skew = 0
        self.page_size = 1000
        self.long_token = 0
        self.faults = set()
        self.cut_done = set()     # (key, range) answers already cut once
        self.others = {}          # (path, etag) -> (other bytes, their ETag): bad-etag
        self.lock = threading.Lock()
        self.counts = {"LIST": 0, "GET": 0, "HEAD": 0, "other": 0}
        self.fail_status = 0
        self.fail_count = 0
        self.reset_count = 0
        self.etags = {}  # path -> (size, mtime_ns, etag)
        self.walks = {}  # directory -> every key below it (flat listings)

    def etag(self, path, st):
        with self.lock:
            cached = self.etags.get(path)
            if cached and cached[0] == st.st_size and cached[1] == st.st_mtime_ns:
                return cached[2]
        with open(path, "rb") as f:
            digest = hashlib.md5(f.read()).hexdigest()
        etag = '"%s"' % digest
        with self.lock:
            self.etags[path] = (st.st_size, st.st_mtime_ns, etag)
        return etag


def iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake_s3"

    def log_message(self, fmt, *args):
        pass

    def date_time_string(self, timestamp=None):
        # The Date header: the server's clock, --skew seconds off.
        return email.utils.formatdate((timestamp or time.time()) + self.state.skew, usegmt=True)

    def faulty(self, name):
        return name in self.state.faults

    @property
    def state(self):
        return self.server.state

    # ---- helpers --------------------------------------------------------
    def send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def error(self, status, code, message, head=False):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                "<Message>%s</Message></Error>" % (code, html.escape(message))).encode()
        self.send(status, body, {"Content-Type": "application/xml"}, head)

    def reset_connection(self):
        # SO_LINGER 0: close() sends RST instead of FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def fault(self):
        """Applies an armed fault; True when the request is answered."""
        st = self.state
        with st.lock:
            if st.reset_count > 0:
                st.reset_count -= 1
                reset = True
            else:
                reset = False
                status = st.fail_status if st.fail_count > 0 else 0
                if status:
                    st.fail_count -= 1
        if reset:
            self.reset_connection()
            return True
        if status:
            self.error(status, "SlowDown" if status == 503 else "InternalError",
                       "Please reduce your request rate.", self.command == "HEAD")
            return True
        return False

    def authorized(self):
        amz_date = self.headers.get("x-amz-date")
        if amz_date:
            signed = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
            if abs(signed - (time.time() + self.state.skew)) > 900:
                self.error(403, "RequestTimeTooSkewed",
                           "The difference between the request time and the current time is too large.",
                           self.command == "HEAD")
                return False
        if self.state.session_token is not None and \
                self.headers.get("x-amz-security-token") != self.state.session_token:
            self.error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.",
                       self.command == "HEAD")
            return False
        if not self.state.access_key:
            return True
        auth = self.headers.get("Authorization", "")
        if "Credential=%s/" % self.state.access_key in auth:
            return True
        self.error(403, "InvalidAccessKeyId",
                   "The AWS Access Key Id you provided does not exist in our records.",
                   self.command == "HEAD")
        return False

    # ---- admin ----------------------------------------------------------
    def admin(self, path, query):
        st = self.state
        if path == "/_fake/stats":
            with st.lock:
                body = json.dumps(st.counts).encode()
            return self.send(200, body, {"Content-Type": "application/json"})
        with st.lock:
            if path == "/_fake/fail":
                st.fail_status = int(query.get("status", ["503"])[0])
                st.fail_count = int(query.get("count", ["1"])[0])
            elif path == "/_fake/reset":
                st.reset_count = int(query.get("count", ["1"])[0])
            elif path == "/_fake/latency":
                st.latency = int(query.get("ms", ["0"])[0]) / 1000.0
            elif path == "/_fake/skew":
                st.skew = int(query.get("s", ["0"])[0])
            elif path == "/_fake/fault":
                name = query.get("name", [""])[0]
                if name not in FAULTS:
                    return self.send(400)
                if query.get("on", ["1"])[0] == "1":
                    st.faults.add(name)
                else:
                    st.faults.discard(name)
                st.cut_done.clear()
            elif path == "/_fake/clear":
                st.counts = {k: 0 for k in st.counts}
            else:
                return self.send(404)
        self.send(200)

    # ---- S3 -------------------------------------------------------------
    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        path = urllib.parse.unquote(url.path)
        if path.startswith("/_fake/"):
            length = int(self.headers.get("Content-Length", "0") or 0)
            if length:
                self.rfile.read(length)
            return self.admin(path, query)
        parts = path.lstrip("/").split("/", 1)
        bucket, key = parts[0], parts[1] if len(parts) > 1 else ""
        is_list = self.command == "GET" and not key
        kind = "LIST" if is_list else self.command if self.command in ("GET", "HEAD") else "other"
        with self.state.lock:
            self.state.counts[kind] += 1
        if self.state.latency:
            time.sleep(self.state.latency)
        if self.fault():
            return
        if not self.authorized():
            return
        bucket_dir = os.path.join(self.state.root, bucket)
        if not bucket or "/" in bucket or not os.path.isdir(bucket_dir):
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.",
                              self.command == "HEAD")
        if is_list:
            return self.list_objects(bucket, bucket_dir, query)
        if self.command not in ("GET", "HEAD"):
            return self.error(405, "MethodNotAllowed", "read-only server")
        return self.get_object(bucket_dir, key)

    do_GET = handle_any
    do_HEAD = handle_any
    do_POST = handle_any
    do_PUT = handle_any

    def object_path(self, bucket_dir, key):
        path = os.path.realpath(os.path.join(bucket_dir, key))
        if not path.startswith(bucket_dir + os.sep) or not os.path.isfile(path):
            return None
        return path

    def get_object(self, bucket_dir, key):
        head = self.command == "HEAD"
        path = self.object_path(bucket_dir, key)
        if not path:
            return self.error(404, "NoSuchKey", "The specified key does not exist.", head)
        st = os.stat(path)
        etag = self.state.etag(path, st)
        if_match = self.headers.get("If-Match")
        with open(path, "rb") as f:
            data = f.read()
        if self.faulty("bad-etag") and not head:
            # Another version of the object: If-Match is not honoured.
            with self.state.lock:
                other = self.state.others.get((path, etag))
            if other is None:
                flipped = (int.from_bytes(data, "big") ^ int.from_bytes(b"\x5a" * len(data), "big")) \
                    .to_bytes(len(data), "big")
                other = (flipped, '"%s"' % hashlib.md5(flipped).hexdigest())
                with self.state.lock:
                    self.state.others[(path, etag)] = other
            data, etag = other
            if_match = None
        if if_match and if_match != etag and if_match != "*":
            return self.error(412, "PreconditionFailed",
                              "At least one of the pre-conditions you specified did not hold", head)
        headers = {"ETag": etag, "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        size = st.st_size
        rng = self.headers.get("Range")
        start, end, status = 0, size - 1, 200
        if rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
            if start >= size:
                headers["Content-Range"] = "bytes */%d" % size
                return self.error(416, "InvalidRange", "The requested range is not satisfiable", head)
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        if head:
            headers["Content-Length"] = str(size)
            self.send_response(200)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            return
        if status == 206 and self.faulty("wrong-range"):
            start = min(start + 64, size - 1)
            end = min(end + 64, size - 1)
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        body = data[start:end + 1] if size else b""
        if status == 206 and self.faulty("full-body-for-range"):
            status, body = 200, data
            del headers["Content-Range"]
        elif status == 206 and self.faulty("range-as-200"):
            status = 200
            del headers["Content-Range"]
        for kind in ("cut-body", "cut-body-unframed", "reset-mid-body"):
            if self.faulty(kind) and len(body) >= 2:
                with self.state.lock:
                    once = (kind, path, rng) not in self.state.cut_done
                    self.state.cut_done.add((kind, path, rng))
                if once:
                    return self.send_cut(kind, status, body, headers)
        self.send(status, body, headers)

    def send_cut(self, kind, status, body, headers):
        """Half of body, then a close (cut-body: after a full Content-Length;
        cut-body-unframed: with none) or a reset (reset-mid-body)."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if kind == "cut-body-unframed":
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:len(body) // 2])
        self.wfile.flush()
        if kind == "reset-mid-body":
            self.reset_connection()
        else:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def list_objects(self, bucket, bucket_dir, query):
        prefix = query.get("prefix", [""])[0]
        delimiter = query.get("delimiter", [""])[0]
        max_keys = min(int(query.get("max-keys", ["1000"])[0]), self.state.page_size)
        token = query.get("continuation-token", [""])[0]
        if token and self.state.long_token:
            token = token.split("|", 1)[1]   # "xxx...|KEY": the key after the padding
        url_encoded = query.get("encoding-type", [""])[0] == "url"

        def enc(text):
            return urllib.parse.quote_plus(text, safe="/") if url_encoded else html.escape(text)
        # Walk only below the prefix's directory part.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start_dir = os.path.join(bucket_dir, base)
        keys = []
        if os.path.isdir(start_dir):
            if delimiter == "/":
                for entry in os.scandir(start_dir):
                    rel = (base + "/" if base else "") + entry.name
                    if entry.is_dir():
                        keys.append(rel + "/")
                    elif entry.is_file():
                        keys.append(rel)
            else:
                # A flat listing pages through every key below: walk once per
                # server (its keys stay; their bytes may change), stat per page.
                with self.state.lock:
                    walked = self.state.walks.get(start_dir)
                if walked is None:
                    walked = []
                    for dirpath, _, files in os.walk(start_dir):
                        for name in files:
                            walked.append(os.path.relpath(os.path.join(dirpath, name), bucket_dir))
                    with self.state.lock:
                        self.state.walks[start_dir] = walked
                keys = list(walked)
        keys = sorted(k for k in keys if k.startswith(prefix))
        if token:
            keys = [k for k in keys if k > token]
        page, rest = keys[:max_keys], keys[max_keys:]
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys>"
               % (html.escape(bucket), enc(prefix), len(page), max_keys),
               "<IsTruncated>%s</IsTruncated>" % ("true" if rest else "false")]
        if rest and not self.faulty("truncated-listing-no-token"):
            next_token = page[-1]
            if self.state.long_token:
                pad = max(self.state.long_token - len(next_token.encode()) - 1, 0)
                next_token = "x" * pad + "|" + next_token
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % html.escape(next_token))
        for key in page:
            if key.endswith("/"):
                out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % enc(key))
                continue
            path = os.path.join(bucket_dir, key)
            st = os.stat(path)
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>%s</ETag>"
                       "<Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>"
                       % (enc(key), iso(st.st_mtime), html.escape(self.state.etag(path, st)),
                          st.st_size))
        if url_encoded:
            out.append("<EncodingType>url</EncodingType>")   # after the keys, as S3 puts it
        out.append("</ListBucketResult>")
        self.send(200, "".join(out).encode(), {"Content-Type": "application/xml"})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="directory holding one directory per bucket")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="written with the port once listening")
    parser.add_argument("--latency", type=float, default=0, help="milliseconds added to every request")
    parser.add_argument("--access-key", help="the only access key accepted")
    parser.add_argument("--session-token-file", help="the session token requests must carry")
    parser.add_argument("--skew", type=int, default=0, help="seconds the server's clock is off")
    parser.add_argument("--page-size", type=int, default=1000, help="most keys per listing page")
    parser.add_argument("--long-token", type=int, default=0, help="continuation tokens of this many bytes")
    for name in FAULTS:
        parser.add_argument("--" + name, action="store_true", help="a faulty server (see above)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.request_queue_size = 128
    server.state = State(args.root, args.latency, args.access_key)
    server.state.skew = args.skew
    server.state.page_size = args.page_size
    server.state.long_token = args.long_token
    server.state.faults = {name for name in FAULTS if getattr(args, name.replace("-", "_"))}
    if args.session_token_file:
        with open(args.session_token_file) as f:
            server.state.session_token = f.read().strip()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
