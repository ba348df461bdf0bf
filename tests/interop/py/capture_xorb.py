"""Captures the xorbs the real hf-xet uploads, exactly as sent, for crates/core/tests/data/vectors/.

Runs a recording CAS stub on 127.0.0.1 (grants and dedup 404, xorbs stored to OUT_DIR),
uploads a deterministic sample with hf_xet.upload_files, and writes each xorb body as
OUT_DIR/<hash>.footerless.xorb. Used once to make the vector; not run by the tests.

  capture_xorb.py OUT_DIR
"""

import http.server
import os
import sys
import threading
import time

import hf_xet

OUT = sys.argv[1]


def sample():
    # 64 KiB of log text then 96 KiB of an LCG's bytes: text compresses (LZ4), noise
    # does not (stored raw).
    text = b"".join(b"line %d of a sample log\n" % (i % 97) for i in range(2900))[: 64 * 1024]
    x, noise = 12345, bytearray()
    for _ in range(96 * 1024):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        noise.append(x >> 16 & 0xFF)
    return text + bytes(noise)


class Stub(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/v1/xorbs/default/"):
            name = self.path.rsplit("/", 1)[1]
            with open(os.path.join(OUT, name + ".footerless.xorb"), "wb") as f:
                f.write(body)
            self.reply(200, b'{"was_inserted": true}')
        elif self.path == "/v1/shards":
            self.reply(200, b'{"result": 1}')
        else:
            self.reply(404, b"not here")

    def do_GET(self):
        self.reply(404, b"not here")

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
threading.Thread(target=server.serve_forever, daemon=True).start()
path = os.path.join(OUT, "sample.in")
with open(path, "wb") as f:
    f.write(sample())
try:
    info = hf_xet.upload_files(
        [path], f"http://127.0.0.1:{server.server_port}", ("t", int(time.time()) + 600), None, None, "model"
    )
    print("file", info[0].hash, info[0].file_size)
finally:
    server.shutdown()
    os.remove(path)
