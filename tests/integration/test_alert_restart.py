"""kill -9 of the real collector while its webhook POST is in flight: the alert is sent again
(at least once, the same webhook-id) once the lease is over, and never after its resolution."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import CollectorProcess, register, start_agent, stop_all
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(240)

HOST = "spark-alert"
TIMEOUT_S = 2.0  # FREEZEWATCH_WEBHOOK_TIMEOUT_S: the lease is 2 x 2 + 5 = 9 s


@contextmanager
def stalling_receiver() -> Iterator[tuple[str, list[dict[str, Any]], threading.Event]]:
    """A webhook receiver that holds its first request unanswered until told; then 200s.
    Yields (url, every request in arrival order, the first-request-arrived event)."""
    seen: list[dict[str, Any]] = []
    first, release = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"id": self.headers["webhook-id"], "event": body["event"]})
            if len(seen) == 1:
                first.set()
                release.wait(60)  # the collector is killed while we hold this
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", seen, first
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_kill_9_mid_post_sends_again_and_never_an_opened_after_its_resolved(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite:///{tmp_path / 'fw.db'}"
    token = register(db_url, [HOST])[HOST]
    with stalling_receiver() as (url, seen, first):
        collector = CollectorProcess(
            db_url,
            tmp_path / "collector.log",
            FREEZEWATCH_WEBHOOK_URLS=f"{url}|json",
            FREEZEWATCH_WEBHOOK_TIMEOUT_S=str(TIMEOUT_S),
        )
        collector.start()
        agent = start_agent(collector.url, token, HOST, tmp_path / "agent")
        try:
            wait_for(lambda: collector.api(f"/api/v1/hosts/{HOST}")["status"] == "up", 60)
            agent.send_signal(signal.SIGSTOP)  # the host freezes
            assert first.wait(30)  # incident.opened is in flight, unanswered
            collector.stop(signal.SIGKILL)
            agent.send_signal(signal.SIGCONT)  # back while the collector is down
            collector.start()
            wait_for(lambda: len(seen) >= 3, 90, 0.2)
        finally:
            agent.send_signal(signal.SIGCONT)
            stop_all([agent])
            collector.stop()
    events = [s["event"] for s in seen]
    assert events == ["incident.opened", "incident.opened", "incident.resolved"]
    assert seen[0]["id"] == seen[1]["id"]  # the same delivery again: receivers key on it
