"""A node-exporter-like scrape target for the peers bench: ``GET /metrics`` answers, as gauges,
what the agent sends each second (this machine's meminfo, memory/cpu/io pressure, vmstat).

    python -m bench._peers_target PORT
"""

from __future__ import annotations

import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROC = Path("/proc")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(name: str) -> str:
    return _UNSAFE.sub("_", name)


def exposition(proc: Path = PROC) -> str:
    out = []
    for line in (proc / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        value = rest.split()
        scale = 1024 if value[1:] == ["kB"] else 1
        out.append(f"node_memory_{metric_name(key)}_bytes {int(value[0]) * scale}")
    for resource in ("cpu", "memory", "io"):
        path = proc / "pressure" / resource
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            kind, *pairs = line.split()
            for pair in pairs:
                key, _, value = pair.partition("=")
                out.append(f'node_pressure_{resource}_{key}{{kind="{kind}"}} {value}')
    for line in (proc / "vmstat").read_text().splitlines():
        key, value = line.split()
        out.append(f"node_vmstat_{metric_name(key)} {value}")
    return "\n".join(out) + "\n"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = exposition().encode()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()


if __name__ == "__main__":
    main()
