"""TEST DOUBLE: a stand-in for an LLM serving engine, used only by tests/test_harvest_run.py.

It is not an engine and measures nothing. On 127.0.0.1 it serves ``GET /health`` (503 until a
start-up delay has passed, then 200) and a streaming ``POST /v1/completions`` that emits one
dummy token per chunk. It prints vLLM-style start-up lines (version, attention backend, KV cache
size) so the log parser has something to read, and it exits by itself after ``--lifetime``
seconds so a crashed test never leaves it behind.

Knobs for the failure paths: ``--startup-delay`` (health timeout), ``--fail-max-tokens N``
(HTTP 500 for requests asking N tokens: a failed probe), ``--spawn-child`` (a worker process in
the same process group, to check teardown), ``--ignore-sigterm`` (teardown must escalate).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_TOKENS_CAP = 4096


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--startup-delay", type=float, default=0.0)
    p.add_argument("--token-delay", type=float, default=0.001)
    p.add_argument("--fail-max-tokens", type=int, default=-1)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--lifetime", type=float, default=120.0)
    p.add_argument("--spawn-child", action="store_true")
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--pid-file", default=None)
    args = p.parse_args()
    ready_at = time.monotonic() + args.startup_delay

    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = None
    if args.spawn_child:
        # A "worker" in our process group that outlives nothing: it also ends after --lifetime.
        child = subprocess.Popen([sys.executable, "-c",
                                  f"import time, signal; signal.signal(signal.SIGTERM, "
                                  f"signal.{'SIG_IGN' if args.ignore_sigterm else 'SIG_DFL'}); "
                                  f"time.sleep({args.lifetime})"])
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(f"{os.getpid()} {child.pid if child else ''}\n")

    print("INFO standin: TEST DOUBLE, not an engine", flush=True)
    print("INFO [utils.py] version 0.0.0+standin", flush=True)
    print("INFO [cuda.py] Using STANDIN attention backend out of potential backends: ['STANDIN']",
          flush=True)
    print("INFO [kv_cache_utils.py] GPU KV cache size: 4,096 tokens", flush=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                ok = time.monotonic() >= ready_at
                self._send(200 if ok else 503, b"{}")
            else:
                self._send(404, b"{}")

        def do_POST(self):
            if self.path != "/v1/completions":
                self._send(404, b"{}")
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            n = max(1, min(int(body.get("max_tokens", 16)), MAX_TOKENS_CAP))
            if n == args.fail_max_tokens:
                self._send(500, b'{"error": "stand-in configured to fail"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            k = max(1, args.tokens_per_chunk)
            for first in range(0, n, k):  # k tokens per chunk: a coalescing stream when k > 1
                words = []
                for i in range(first, min(n, first + k)):
                    time.sleep(args.token_delay)
                    words.append(f" t{i}")
                chunk = {"choices": [{"index": 0, "text": "".join(words)}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    print(f"INFO standin: listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
        if child is not None and child.poll() is None:
            child.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
