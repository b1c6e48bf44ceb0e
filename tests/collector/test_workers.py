"""``serve --workers``: what is refused before any worker starts, the sockets the workers
listen on, a worker that cannot start stopping the collector with its exit code, and a
replacement that cannot start being tried again."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
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
    with socket.create_server(("127.0.0.1", 0)) as taken, pytest.raises(OSError):
        workers.listen("127.0.0.1", taken.getsockname()[1], 2)


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


class FakeProcess:
    """A worker process as the supervisor sees it: alive or exited with a code."""

    def __init__(self, pid: int, *, alive: bool, exitcode: int | None = None) -> None:
        self.pid, self.alive, self.exitcode = pid, alive, exitcode

    def is_alive(self) -> bool:
        return self.alive

    def join(self, timeout: float | None = None) -> None:
        pass

    def terminate(self) -> None:
        self.alive, self.exitcode = False, -15

    kill = terminate


class Supervised:
    """``workers.run`` with the processes replaced: each start takes the next of ``plan``
    (alive and serving, or dead before serving with an exit code)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, plan: list[int | None]) -> None:
        self.plan, self.started, self.dead = plan, list[int](), list[int]()
        self.on_signal: Callable[[int, object], None] | None = None
        monkeypatch.setenv(workers.MULTIPROC_ENV, "restored after the test")
        monkeypatch.setattr(workers, "POLL_S", 0.01)
        monkeypatch.setattr(workers, "RESTART_DELAY_S", 0.01)
        monkeypatch.setattr(workers, "start", self.start)
        monkeypatch.setattr(workers, "mark_process_dead", lambda pid, _dir: self.dead.append(pid))
        monkeypatch.setattr(signal, "signal", self.catch)

    def catch(self, sig: int, handler: Callable[[int, object], None]) -> None:
        self.on_signal = handler

    def start(self, index: int, *_args: object, first: bool = True) -> workers.Worker:
        self.started.append(index)
        serving = threading.Event()
        if not self.plan:  # every step taken: SIGTERM
            assert self.on_signal is not None
            self.on_signal(signal.SIGTERM, None)
        code = self.plan.pop(0) if self.plan else None
        if code is None:
            serving.set()
        process = FakeProcess(1000 + len(self.started), alive=code is None, exitcode=code)
        return workers.Worker(index, process, serving, time.monotonic(), first)  # type: ignore[arg-type]

    def run(self, count: int) -> int:
        return workers.run(Settings(db_url=PG, workers=count, port=0))


def test_a_replacement_that_fails_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both start; worker 1 then dies; its first replacement cannot start (the database away
    # for a moment, exit 3); the next one serves.
    supervised = Supervised(monkeypatch, [None, None, 3])
    original = supervised.start

    def start(index: int, *args: object, first: bool = True) -> workers.Worker:
        worker = original(index, *args, first=first)
        if len(supervised.started) == 2:  # worker 1 of the first generation dies after serving
            worker.process.alive, worker.process.exitcode = False, -9  # type: ignore[attr-defined]
        return worker

    monkeypatch.setattr(workers, "start", start)
    assert supervised.run(2) == 0
    assert supervised.started == [0, 1, 1, 1]  # the last start is where the test stops it
    assert supervised.dead == [1002, 1003]  # each dead one's live metrics dropped


def test_a_first_worker_that_cannot_start_stops_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    supervised = Supervised(monkeypatch, [None, 3])
    assert supervised.run(2) == 3
    assert supervised.started == [0, 1] and supervised.dead == []
