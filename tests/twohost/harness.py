"""A real collector (uvicorn + scheduler) on loopback, or as its own `serve` process; a test
host (sshd + stand-in agent)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from collector import db
from collector.hosts import registry as hosts
from collector.main import create_app
from collector.settings import Settings
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "fwa_twohost-admin-EYnDAktgOESZAdghXfaqlvEUZu-xfxo-"
# Freeze detection in seconds rather than minutes, for a `serve` process under test.
FAST_ENV = {
    "FREEZEWATCH_GRACE_S": "1.5",
    # An SSH handshake on a machine a full test run loads (~9 runnable per core) can take over
    # a second: a 1 s probe deadline read a live sshd as an unreachable host there.
    "FREEZEWATCH_PROBE_DEADLINE_S": "3.0",
    "FREEZEWATCH_CHECK_INTERVAL_S": "0.2",
    "FREEZEWATCH_DELIVERY_INTERVAL_S": "0.2",
    "FREEZEWATCH_RESOLVE_SETTLE_S": "2.0",
    "FREEZEWATCH_STALL_MIN_S": "3.0",
    "FREEZEWATCH_POSTMORTEM_INTERVAL_S": "0.3",
    "FREEZEWATCH_POSTMORTEM_RETRY_S": "0.5",
    "FREEZEWATCH_POSTMORTEM_TIMEOUT_S": "10",
}


@dataclass
class Running:
    url: str
    settings: Settings
    server: uvicorn.Server

    def api(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=5)
        r.raise_for_status()
        return r.json()

    def add_host(self, name: str, **config: Any) -> str:
        engine = db.make_engine(self.settings.db_url)
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            _host, token = hosts.create_host(session, name=name)
        engine.dispose()
        if config:
            r = httpx.patch(
                f"{self.url}/api/v1/hosts/{name}",
                json=config,
                timeout=5,
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
            r.raise_for_status()
        return token


@contextmanager
def running_collector(tmp: Path, **overrides: Any) -> Iterator[Running]:
    port = free_port()
    settings = Settings(
        db_url=f"sqlite:///{tmp / 'collector.db'}",
        admin_token=ADMIN,
        bind="127.0.0.1",
        port=port,
        **overrides,
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "collector did not start"
        time.sleep(0.05)
    try:
        yield Running(url=f"http://127.0.0.1:{port}", settings=settings, server=server)
    finally:
        server.should_exit = True
        thread.join(15)
        if thread.is_alive():  # still waiting on open connections: a leaked collector would
            server.force_exit = True  # go on running its jobs through the tests after it
            thread.join(15)


class StandinAgent:
    def __init__(
        self,
        url: str,
        token: str,
        host: str,
        boot_file: Path,
        interval_s: float,
        argv_prefix: list[str] | None = None,
    ) -> None:
        self.argv = [
            *(argv_prefix or []),
            sys.executable,
            "-m",
            "tests.twohost.standin_agent",
            url,
            token,
            host,
            str(boot_file),
            str(interval_s),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StandinAgent:
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL works on a stopped process; no SIGCONT, no last batch
            self.proc.wait(5)


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 20.0,
    step: float = 0.1,
    *,
    what: str = "condition",
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        time.sleep(step)


def start_collector(
    db_url: str, bind: str, env: dict[str, str], log: Path, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m collector serve` on ``bind`` (``port``, else a free one), ``env`` on top of
    ours; (process, base URL) once it answers /healthz."""
    port = port or free_port(bind)
    full = {
        **os.environ,
        **env,
        "FREEZEWATCH_DB_URL": db_url,
        "FREEZEWATCH_BIND": bind,
        "FREEZEWATCH_PORT": str(port),
    }
    out = open(log, "ab")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
        cwd=ROOT,
        env=full,
        stdout=out,
        stderr=out,
    )
    url = f"http://{bind}:{port}"

    def healthy() -> bool:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout=60)
    return proc, url
