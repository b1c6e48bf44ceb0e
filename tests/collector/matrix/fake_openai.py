"""A small OpenAI-compatible chat server for workload tests (stdlib only, loopback)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ASK = re.compile(r"call the `(\w+)` tool (?:now )?with arguments (\{.*\})\.$", re.IGNORECASE)


class FakeChatServer:
    """Answers each turn with the requested tool call; `malformed_step` gets bad arguments once
    (its retry is valid); `slow_step` sleeps; `block_step` waits on `release`."""

    def __init__(self, malformed_step=None, slow_step=None, block_step=None, slow_s=5.0):
        self.malformed_step = malformed_step
        self.slow_step = slow_step
        self.block_step = block_step
        self.slow_s = slow_s
        self.bodies: list[dict] = []
        self.reached = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, payload = server.answer(json.loads(body))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may have given up
                    self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def requests(self) -> int:
        with self._lock:
            return len(self.bodies)

    def answer(self, request: dict) -> tuple[int, dict]:
        with self._lock:
            self.bodies.append(request)
        last = request["messages"][-1]["content"]
        step = f"Step {self.block_step}:"
        if self.block_step and last.startswith(step):
            self.reached.set()
            self.release.wait(10)
        if self.slow_step and last.startswith(f"Step {self.slow_step}:"):
            time.sleep(self.slow_s)
        match = ASK.search(last)
        name, args = match.group(1), match.group(2)
        arguments = args
        if self.malformed_step and last.startswith(f"Step {self.malformed_step}:"):
            arguments = args[:-1]  # truncated JSON, like a model cut short
        digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        prompt_tokens = len(json.dumps(request["messages"])) // 4
        return 200, {
            "id": f"chatcmpl-{digest[:12]}",
            "object": "chat.completion",
            "model": request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"chatcmpl-tool-{digest[:16]}",
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 20,
                "total_tokens": prompt_tokens + 20,
            },
        }
