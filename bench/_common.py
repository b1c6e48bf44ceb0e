"""Shared bench plumbing: a real collector process on a throwaway database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ADMIN = "fwa_bench-admin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_host(db_url: str, name: str) -> str:
    from collector import db
    from collector.hosts import registry as hosts

    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        _host, token = hosts.create_host(session, name=name)
    engine.dispose()
    return token


@contextmanager
def running_collector(db_url: str, **env: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
        cwd=ROOT,
        env={
            **os.environ,
            "FREEZEWATCH_DB_URL": db_url,
            "FREEZEWATCH_PORT": str(port),
            "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
            **env,
        },
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("collector did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
