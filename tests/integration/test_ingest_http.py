"""Ingest over real HTTP (uvicorn, SQLite): an agent slow or gone in the middle of its POST body
holds nothing up, and going away is an expected event (an info line naming the host, no ERROR,
nothing stored)."""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

import httpx
import pytest
from fastapi import FastAPI

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


def test_an_agent_stuck_mid_body_holds_no_lock_over_the_others(tmp_path: Path) -> None:
    """SQLite has one write lock; a request must not hold it while it waits for its body."""
    with running_collector(tmp_path, run_scheduler=False) as c:
        slow_token, fast_token = c.add_host("spark-slow"), c.add_host("spark-fast")
        port = int(c.url.rsplit(":", 1)[1])
        stuck = []
        for _ in range(3):  # authenticated, then silent in the middle of their bodies
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(
                f"POST {INGEST_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {slow_token}"
                "\r\nContent-Length: 100000\r\n\r\n{".encode()
            )
            stuck.append(sock)
        time.sleep(0.3)
        try:
            body = json.dumps({"host": "spark-fast", "boot_id": "b", "agent": {"version": "t"}})
            r = httpx.post(
                c.url + INGEST_PATH,
                content=body,
                headers={"Authorization": f"Bearer {fast_token}"},
                timeout=60,
            )
            assert r.status_code == 200, r.text  # stored, not "database is locked"
        finally:
            for sock in stuck:
                sock.close()


def test_a_small_batch_waits_for_a_held_write_lock_off_the_event_loop(tmp_path: Path) -> None:
    """A heartbeat is stored on the event loop only when SQLite's write lock is free; held by
    another connection, the batch waits in a thread and the collector answers others."""
    with running_collector(tmp_path, run_scheduler=False) as c:
        token = c.add_host("spark-wait")
        headers = {"Authorization": f"Bearer {token}"}
        agent = {"version": "t"}

        def batch(seq: int) -> str:
            line = {"seq": seq, "ts": time.time(), "source": "kmsg", "text": f"line {seq}"}
            return json.dumps(
                {"host": "spark-wait", "boot_id": "b", "agent": agent, "lines": [line]}
            )

        assert httpx.post(c.url + INGEST_PATH, content=batch(1), headers=headers).is_success
        backlog = cast(FastAPI, c.server.config.app).state.ingest_backlog
        holder = sqlite3.connect(tmp_path / "collector.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the one write lock
        try:
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(
                    httpx.post, c.url + INGEST_PATH, content=batch(2), headers=headers, timeout=60
                )
                wait_for(lambda: backlog.lag_s() > 0)  # the batch is in the collector
                time.sleep(0.2)  # ... and at the lock
                doc = httpx.get(c.url + "/openapi.json", timeout=10)  # the loop is free
                assert doc.status_code == 200
                assert not pending.done()  # the batch still waits for the lock
                holder.execute("ROLLBACK")
                answer = pending.result(timeout=60)
        finally:
            holder.close()
        assert answer.status_code == 200, answer.text
        assert answer.json()["stored"]["lines"] == 1


def test_a_small_batch_never_waits_on_the_loop_for_the_connection_pool(tmp_path: Path) -> None:
    """Every pooled connection out (readers, writers queued for the lock): the event loop must
    not wait for one (SQLAlchemy's checkout waits up to 30 s, and every agent with it)."""
    with running_collector(tmp_path, run_scheduler=False) as c:
        token = c.add_host("spark-pool")
        headers = {"Authorization": f"Bearer {token}"}
        body = json.dumps({"host": "spark-pool", "boot_id": "b", "agent": {"version": "t"}})
        assert httpx.post(c.url + INGEST_PATH, content=body, headers=headers).is_success
        pool = cast(FastAPI, c.server.config.app).state.engine.pool
        held = [pool.connect() for _ in range(pool.size() + pool._max_overflow)]
        try:
            answer = httpx.post(c.url + INGEST_PATH, content=body, headers=headers, timeout=60)
        finally:
            for conn in held:
                conn.close()
        assert answer.status_code == 200, answer.text
