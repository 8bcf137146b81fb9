"""An HTTPS API for the egress tests that records every request it receives, so a test reads
what reached it (and what did not) from the server's own record, never from the proxy's words.

    python3 recording_https.py CERT KEY LOG PORT_FILE

Each request is one JSON line in LOG: method, path (with its query), headers, body. Routes:
/data.csv a small CSV; /echo the request's headers as JSON (an API that echoes a secret back);
/echo-header its Authorization back in the X-Echo header;
/redirect?to=URL a 302 there; /big?mb=N N MiB of bytes; /people.json a customer's email
and phone (the email in its X-Owner header too); /people.bin the same email among bytes that are not text; /people.gz the JSON
gzip-compressed whatever the client asked for; anything else "ok". The port it
listens on (127.0.0.1, chosen by the kernel) is written to PORT_FILE once it accepts.
"""

import gzip
import http.server
import json
import os
import ssl
import sys
import threading
import urllib.parse

CERT, KEY, LOG, PORT_FILE = sys.argv[1:5]
LOCK = threading.Lock()
CSV = b"name,amount\nalpha,1\nbeta,2\ngamma,3\n"
PEOPLE = json.dumps({"people": [{"name": "Ann Lee", "email": "ann.lee@example.com",
                                 "phone": "+1 415 555 0134", "visits": 12}]}).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _record(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        line = {"method": self.command, "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace")}
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps(line) + "\n")

    def _send(self, status, body, ctype="text/plain", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _answer(self):
        self._record()
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/data.csv":
            self._send(200, CSV, "text/csv")
        elif url.path == "/echo":
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(200, json.dumps(headers).encode(), "application/json")
        elif url.path == "/echo-header":
            echoed = self.headers.get("Authorization", "")
            self._send(200, b"ok", extra=[("X-Echo", echoed)])
        elif url.path == "/people.json":
            self._send(200, PEOPLE, "application/json",
                       extra=[("X-Owner", "ann.lee@example.com")])
        elif url.path == "/people.bin":
            self._send(200, b"\x89\xff\x00 ann.lee@example.com", "application/octet-stream")
        elif url.path == "/people.gz":
            self._send(200, gzip.compress(PEOPLE), "application/json",
                       extra=[("Content-Encoding", "gzip")])
        elif url.path == "/redirect":
            self._send(302, b"", extra=[("Location", query["to"][0])])
        elif url.path == "/big":
            size = int(query.get("mb", ["1"])[0]) << 20
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = b"x" * (1 << 20)
            for _ in range(size >> 20):
                self.wfile.write(block)
        else:
            self._send(200, b"ok")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
