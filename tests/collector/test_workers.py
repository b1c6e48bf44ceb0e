"""``serve --workers``: what is refused before any worker starts, the sockets the workers
listen on, and a worker that cannot start stopping the collector with its exit code."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from collector import workers
from collector.cli import main
from collector.settings import Settings
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PG = "postgresql://nobody@127.0.0.1:1/none"  # refused at once: nothing listens on port 1


def test_more_than_one_worker_needs_postgres(capsys: pytest.CaptureFixture[str]) -> None:
    assert workers.problem(Settings(db_url="sqlite:///x.db", workers=1)) is None
    assert workers.problem(Settings(db_url=PG, workers=4)) is None
    assert main(["serve", "--workers", "2", "--db", "sqlite:///never.db"]) == 2
    assert "--workers 2 needs PostgreSQL" in capsys.readouterr().err
    assert not Path("never.db").exists()


def test_each_worker_gets_a_socket_on_the_one_port() -> None:
    socks = workers.listen("127.0.0.1", 0, 3)
    try:
        ports = {s.getsockname()[1] for s in socks}
        assert len(socks) == 3 and len(ports) == 1 and ports != {0}
        with socket.create_connection(("127.0.0.1", ports.pop()), timeout=5):
            pass  # accepted into one of their queues
    finally:
        for s in socks:
            s.close()


def test_a_port_in_use_fails_before_any_worker_starts() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            workers.listen("127.0.0.1", port, 2)
    again = workers.listen("127.0.0.1", port, 2)  # the failed attempt left nothing bound
    for s in again:
        s.close()


@pytest.mark.parametrize(
    ("env", "code", "says"),
    [
        ({"FREEZEWATCH_ADMIN_TOKEN": "short"}, 2, "too weak"),  # refused by the app
        ({}, 3, "connection"),  # the database is not there: uvicorn's startup failure
    ],
)
def test_a_worker_that_cannot_start_stops_the_collector(
    env: dict[str, str], code: int, says: str
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEWATCH_")}
    done = subprocess.run(
        [sys.executable, "-m", "collector", "serve", "--workers", "2", "--db", PG,
         "--port", str(free_port())],
        cwd=ROOT, env={**environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]
    assert says in done.stderr.lower()
    assert "worker 0" in done.stderr and "did not start" in done.stderr


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "-1"]])
def test_a_worker_count_under_one_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--db", "sqlite:///never.db", *argv])
    assert stop.value.code == 2
    assert "workers: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert not Path("never.db").exists()
