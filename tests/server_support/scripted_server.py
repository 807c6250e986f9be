#!/usr/bin/env python3
"""A scripted OpenAI-compatible streaming server on 127.0.0.1 for tests/server_lifecycle.rs.

Behaviour by flag: --ready-after S (HTTP 503 "Loading model" for S seconds), --never-ready,
--exit-after N (exits with code 7 when the N-th chat request arrives), --ignore-term (ignores
SIGTERM), --pidfile PATH (writes its pid), --build B (its /props build_info), --filter-every N
(every N-th chat request ends its tokens with finish_reason "content_filter"). Serves /v1/models, /v1/chat/completions (SSE,
max_tokens tokens --token-ms apart (default 2), usage at the end), /props (llama.cpp style) and /metrics
(llamacpp:* counters). Logs to stdout.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--ready-after", type=float, default=0.0)
ap.add_argument("--never-ready", action="store_true")
ap.add_argument("--exit-after", type=int, default=0)
ap.add_argument("--ignore-term", action="store_true")
ap.add_argument("--pidfile")
ap.add_argument("--api-key")
ap.add_argument("--token-ms", type=float, default=2.0)
ap.add_argument("--build", default="scripted-1.0")
ap.add_argument("--filter-every", type=int, default=0)
args = ap.parse_args()

START = time.monotonic()
LOCK = threading.Lock()
STATE = {"chats": 0, "prompt_tokens": 0, "prompt_s": 0.0, "predicted": 0, "predicted_s": 0.0}

if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if args.pidfile:
    with open(args.pidfile, "w") as f:
        f.write(str(os.getpid()))


def log(msg):
    print(f"[scripted] {msg}", flush=True)


def ready():
    return not args.never_ready and time.monotonic() - START >= args.ready_after


class H(BaseHTTPRequestHandler):
    def log_message(self, fmt, *a):
        log("%s %s" % (self.command, self.path))

    def json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def loading(self):
        if ready():
            return False
        self.json(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})
        return True

    def do_GET(self):
        if self.loading():
            return
        if self.path == "/v1/models":
            self.json(200, {"object": "list", "data": [{"id": "scripted", "owned_by": "scripted-owner"}]})
        elif self.path == "/props":
            self.json(200, {"build_info": args.build, "model_path": "/models/scripted.gguf",
                            "total_slots": 4, "default_generation_settings": {"n_ctx": 4096}})
        elif self.path == "/metrics":
            with LOCK:
                s = dict(STATE)
            text = (
                "# TYPE llamacpp:prompt_tokens_total counter\n"
                f"llamacpp:prompt_tokens_total {s['prompt_tokens']}\n"
                f"llamacpp:prompt_seconds_total {s['prompt_s']:.6f}\n"
                f"llamacpp:tokens_predicted_total {s['predicted']}\n"
                f"llamacpp:tokens_predicted_seconds_total {s['predicted_s']:.6f}\n"
                "llamacpp:requests_deferred 0\n"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        else:
            self.json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.loading():
            return
        with LOCK:
            STATE["chats"] += 1
            k = STATE["chats"]
        if args.exit_after and k >= args.exit_after:
            log(f"chat request {k}: simulated crash, exiting with code 7")
            os._exit(7)
        max_tokens = int(body.get("max_tokens") or 8)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        t0 = time.monotonic()
        time.sleep(0.005)
        t1 = time.monotonic()
        for i in range(max_tokens):
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": "scripted",
                     "choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(args.token_ms / 1000.0)
        t2 = time.monotonic()
        if args.filter_every and k % args.filter_every == 0:
            # a content filter ends this answer after its tokens (Azure OpenAI's shape)
            stop = {"id": "c", "object": "chat.completion.chunk", "model": "scripted",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}
            self.wfile.write(f"data: {json.dumps(stop)}\n\n".encode())
        usage = {"id": "c", "object": "chat.completion.chunk", "model": "scripted", "choices": [],
                 "usage": {"prompt_tokens": 5, "completion_tokens": max_tokens, "total_tokens": 5 + max_tokens}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        with LOCK:
            STATE["prompt_tokens"] += 5
            STATE["prompt_s"] += t1 - t0
            STATE["predicted"] += max_tokens
            STATE["predicted_s"] += t2 - t1
        self.close_connection = True


log(f"loading model (ready after {args.ready_after} s{', never' if args.never_ready else ''})")
srv = ThreadingHTTPServer(("127.0.0.1", args.port), H)
srv.daemon_threads = True
log(f"listening on 127.0.0.1:{args.port}")
try:
    srv.serve_forever()
except KeyboardInterrupt:
    pass
sys.exit(0)
