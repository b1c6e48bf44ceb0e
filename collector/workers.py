"""``serve --workers N``: N collector processes on one port, PostgreSQL only.

One process runs its requests' Python on one interpreter. On this project's 2-core machine two
clients posting 1,000-line batches stored 181,000-228,000 lines/s through two workers when the
kernel put their connections on different workers, against 90,000-127,000 on one
(``bench/ingest.py --workers 2``); where the cores are busy already (there: PostgreSQL, the load
and the collector on two), a second process adds nothing (``bench/fleet.py --workers 2``, 500
hosts). Each worker is a replica of "Two collectors on one PostgreSQL" on one port instead of
behind a proxy: the leader lock picks the
one process that runs the singleton jobs (the others' schedulers only check the lock) and
another takes over when it dies, and ingest is exactly once through any of them. On SQLite
more processes would only queue for its one writer.

The first worker starts alone: it migrates, generates the admin token (printed once), records
the collector's start and takes the lead, and only it binds netconsole's UDP port (the others
answer for the receiver from the figures it publishes). The others start once it serves, and
join it. Per-process metrics go to prometheus_client's multiprocess files in a directory the
workers share, so any worker answers a scrape for all of them. A worker that dies is started
again (after a pause if it died young); one of the first that dies before it serves stops the
collector, since a broken configuration fails the same way every time.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from types import FrameType

from prometheus_client.multiprocess import mark_process_dead

from collector.db import is_postgres_url
from collector.main import WorkerRole
from collector.metrics.exposition import METRICS_DIR
from collector.serve import configure_logging, serve
from collector.settings import Settings

log = logging.getLogger(__name__)

SPAWN = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads or locks copied
POLL_S = 0.5
# A worker's graceful stop: its open requests (5 s), then its jobs and the lifespan's end.
STOP_WAIT_S = 30.0
PR_SET_PDEATHSIG = 1
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
BACKLOG = 2048  # uvicorn's default
# A worker that died this young is started again only after a pause: no crash loop at full
# speed while, say, the database is away.
SHORT_LIFE_S = 10.0
RESTART_DELAY_S = 5.0


def problem(settings: Settings) -> str | None:
    """Why these settings cannot run ``settings.workers`` processes, if they cannot."""
    if settings.workers > 1 and not is_postgres_url(settings.db_url):
        return (
            f"--workers {settings.workers} needs PostgreSQL: SQLite takes one writer at a time, "
            "so more processes would only wait for each other"
        )
    return None


@dataclass
class Worker:
    index: int
    process: SpawnProcess
    serving: Event
    started_at: float
    # Started with the collector: failing before it serves means the configuration is broken.
    # A replacement that fails (the database away for a moment) is tried again instead.
    first: bool = True


def run(settings: Settings, *, log_level: str = "info") -> int:
    """Serve with ``settings.workers`` processes until SIGTERM/SIGINT; non-zero when one
    could not start."""
    try:
        socks = listen(settings.bind, settings.port, settings.workers)
    except OSError as exc:
        print(f"error: cannot listen on {settings.bind}:{settings.port}: {exc}", file=sys.stderr)
        return 1
    shared = Path(tempfile.mkdtemp(prefix="freezewatch-workers-"))
    (shared / METRICS_DIR).mkdir()
    # Read by prometheus_client when a worker imports it: its metrics go to files there.
    os.environ[MULTIPROC_ENV] = str(shared / METRICS_DIR)
    stop = threading.Event()

    def on_signal(sig: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    workers: list[Worker] = []
    try:
        workers.append(start(0, settings, log_level, socks[0], shared))
        if not wait_serving(workers[0], stop):
            return failed(workers[0], stop)
        workers += [
            start(i, settings, log_level, socks[i], shared) for i in range(1, settings.workers)
        ]
        log.info(
            "%d collector workers on http://%s:%d (pids %s)",
            len(workers),
            settings.bind,
            settings.port,
            ", ".join(str(w.process.pid) for w in workers),
        )
        while not stop.wait(POLL_S):
            for i, worker in enumerate(workers):
                if worker.process.is_alive():
                    continue
                if worker.first and not worker.serving.is_set():
                    return failed(worker, stop)
                lived = time.monotonic() - worker.started_at
                log.warning(
                    "worker %d (pid %s) exited (code %s) after %.0f s; starting it again",
                    worker.index,
                    worker.process.pid,
                    worker.process.exitcode,
                    lived,
                )
                mark_process_dead(worker.process.pid, str(shared / METRICS_DIR))  # type: ignore[no-untyped-call]
                if lived < SHORT_LIFE_S and stop.wait(RESTART_DELAY_S):
                    break  # told to stop while waiting
                workers[i] = start(
                    worker.index, settings, log_level, socks[worker.index], shared, first=False
                )
        return 0
    finally:
        stop_all(workers)
        for sock in socks:
            sock.close()
        shutil.rmtree(shared, ignore_errors=True)


def listen(host: str, port: int, count: int) -> list[socket.socket]:
    """A listening socket for each worker, all on one port (``SO_REUSEPORT``: the kernel
    spreads new connections over them). Bound here, so a port in use fails before any worker
    starts, and held here, so connections that reach a dead worker's socket wait in its queue
    for the worker started in its place.

    One shared socket would not spread them: every worker wakes for a new connection and the
    first takes all that are waiting (asyncio accepts in a loop), so a few agents that connect
    together all land on one process.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]  # port 0: the others join the one the first got
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def start(
    index: int,
    settings: Settings,
    log_level: str,
    sock: socket.socket,
    shared: Path,
    *,
    first: bool = True,
) -> Worker:
    role = WorkerRole(shared_dir=shared, receiver=index == 0, replacement=not first)
    serving = SPAWN.Event()
    process = SPAWN.Process(
        target=worker_main,
        args=(settings, role, log_level, sock, serving, os.getpid()),
        name=f"freezewatch-worker-{index}",
    )
    process.start()
    return Worker(index, process, serving, time.monotonic(), first)


def wait_serving(worker: Worker, stop: threading.Event) -> bool:
    while not stop.is_set():
        if worker.serving.wait(POLL_S):
            return True
        if not worker.process.is_alive():
            return worker.serving.is_set()
    return False


def failed(worker: Worker, stop: threading.Event) -> int:
    """The collector's exit code when ``worker`` did not come up (0 if we were told to stop)."""
    if stop.is_set():
        return 0
    worker.process.join(STOP_WAIT_S)
    code = worker.process.exitcode
    log.error(
        "worker %d (pid %s) did not start (exit code %s)", worker.index, worker.process.pid, code
    )
    return code if isinstance(code, int) and code > 0 else 1


def stop_all(workers: list[Worker]) -> None:
    """SIGTERM to each (a graceful stop), then SIGKILL to what is left after STOP_WAIT_S."""
    alive = [w for w in workers if w.process.is_alive()]
    for worker in alive:
        worker.process.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for worker in alive:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            log.error(
                "worker %d (pid %s) did not stop; killing it", worker.index, worker.process.pid
            )
            worker.process.kill()
            worker.process.join()


def worker_main(
    settings: Settings,
    role: WorkerRole,
    log_level: str,
    sock: socket.socket,
    serving: Event,
    parent: int,
) -> None:
    """A worker process: one collector on its socket, gone when its supervisor is."""
    die_with(parent)
    configure_logging()
    sys.exit(serve(settings, log_level=log_level, sock=sock, serving=serving, worker=role))


def die_with(parent: int) -> None:
    """SIGTERM this process when the supervisor dies, even by SIGKILL (Linux), so no orphan
    keeps serving on the port; exits now if it is already gone."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: a supervisor killed outright leaves its workers running
    if os.getppid() != parent:
        sys.exit(0)
