"""An agent that goes away in the middle of a POST body (killed, link cut) is an expected
event: one info line naming the host, no ERROR, nothing stored; the next batch is taken."""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path

import httpx
import pytest

from agent.wire import INGEST_PATH
from tests.twohost.harness import running_collector, wait_for


def test_client_gone_mid_body_is_an_info_line_with_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with running_collector(tmp_path, run_scheduler=False) as c:
        token = c.add_host("spark-cut")
        port = int(c.url.rsplit(":", 1)[1])
        body = json.dumps({"host": "spark-cut", "boot_id": "b", "agent": {"version": "t"}})
        with socket.create_connection(("127.0.0.1", port)) as sock:
            head = (
                f"POST {INGEST_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body) * 100}\r\n\r\n"
            )
            sock.sendall(head.encode() + body[:40].encode())
            time.sleep(0.3)  # the collector is reading the body now
        wait_for(lambda: any("disconnected mid-body" in r.getMessage() for r in caplog.records))
        r = httpx.post(
            c.url + INGEST_PATH, content=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 200  # the next batch is stored as usual
        assert c.api("/api/v1/hosts/spark-cut")["status"] == "up"
    gone = [r for r in caplog.records if "disconnected mid-body" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelno == logging.INFO
    assert "spark-cut" in gone[0].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
