"""The peers bench's processes: each started in its own process group and all stopped on exit
(Ctrl-C, SIGTERM or an exception included); their CPU and RSS over a window, from /proc."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from bench._common import ROOT, cpu_seconds, status_kb
from tests.support.simlab import descendants

STOP_GRACE_S = 10.0


class Procs:
    """Every process one measurement started; ``close()`` stops them, newest first."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self._procs: list[tuple[str, subprocess.Popen[bytes], bool]] = []

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> int:
        """``argv`` in a new session (its own process group), output to ``<logdir>/<name>.log``;
        returns its pid."""
        with open(self.logdir / f"{name}.log", "ab") as log, uninterrupted():
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            self._procs.append((name, proc, True))
        return proc.pid

    def adopt(self, name: str, start: Callable[[], subprocess.Popen[bytes]]) -> int:
        """The process ``start()`` returns (a ``bench._common`` helper's, in the bench's own
        process group), registered before a Ctrl-C can leave it behind."""
        with uninterrupted():
            proc = start()
            self._procs.append((name, proc, False))
        return proc.pid

    def process(self, pid: int) -> subprocess.Popen[bytes]:
        return next(p for _n, p, _g in self._procs if p.pid == pid)

    def alive(self, pid: int) -> bool:
        return any(p.pid == pid and p.poll() is None for _n, p, _g in self._procs)

    def log_tail(self, name: str, chars: int = 1500) -> str:
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def close(self) -> None:
        stop_all([(proc, group) for _name, proc, group in reversed(self._procs)])
        self._procs.clear()


def stop_all(procs: list[tuple[subprocess.Popen[bytes], bool]]) -> None:
    """SIGCONT (a stopped process never handles SIGTERM) and SIGTERM to each process (to its
    whole group when it leads one), then SIGKILL to those still running after one grace shared
    by all: a Ctrl-C on a loaded machine waits one grace, not one per process."""

    def send(proc: subprocess.Popen[bytes], group: bool, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)

    def wait_all() -> None:
        deadline = time.monotonic() + STOP_GRACE_S
        for proc, _group in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))

    procs = [(proc, group) for proc, group in procs if proc.poll() is None]
    for proc, group in procs:
        send(proc, group, signal.SIGCONT)
        send(proc, group, signal.SIGTERM)
    wait_all()
    for proc, group in procs:
        if proc.poll() is None:
            send(proc, group, signal.SIGKILL)
    wait_all()


# --keep DIR: each run's directory (configs, logs, databases) is left there for a look.
KEEP: Path | None = None


@contextlib.contextmanager
def run_dir(kind: str) -> Iterator[tuple[Path, Procs]]:
    """A fresh directory for one run and the registry of the processes it starts: they are
    stopped on the way out, then the directory is removed (unless ``KEEP`` is set)."""
    path = Path(tempfile.mkdtemp(prefix=f"fw-peers-{kind}-", dir=KEEP))
    registry = Procs(path)
    try:
        yield path, registry
    finally:
        registry.close()
        if KEEP is None:
            shutil.rmtree(path, ignore_errors=True)


class _Signals:
    """What ``terminate_as_interrupt`` holds back while an ``uninterrupted`` block runs."""

    depth = 0
    pending: int | None = None


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    if _Signals.depth:
        _Signals.pending = signum
        return
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so every ``finally`` runs (processes
    stopped, ``printk_devkmsg`` restored), except inside an ``uninterrupted`` block."""
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A process started and registered (or a setting changed and its undo armed) as one step:
    a signal that arrives meanwhile interrupts right after, never in between."""
    _Signals.depth += 1
    try:
        yield
    finally:
        _Signals.depth -= 1
        if not _Signals.depth and _Signals.pending is not None:
            signum, _Signals.pending = _Signals.pending, None
            raise KeyboardInterrupt(f"signal {signum}")


def children_cpu_seconds(pid: int) -> float:
    """cutime + cstime: the CPU of ``pid``'s children that have exited and been waited for."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """A server and every process under it, living or exited (a PostgreSQL postmaster forks a
    backend per connection and workers that come and go)."""
    total = cpu_seconds(pid) + children_cpu_seconds(pid)
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            total += cpu_seconds(child)
    return total


@dataclass
class Usage:
    """CPU (% of one core, averaged over the window) and RSS at its end (MB)."""

    cpu_pct: float
    rss_mb: float


def measure(
    pids: dict[str, list[int]],
    seconds: float,
    *,
    during: Callable[[float], None] | None = None,
    tree: frozenset[str] = frozenset(),
) -> dict[str, Usage]:
    """CPU and RSS of each named group of processes over ``seconds``; ``during(deadline)``
    drives the workload meanwhile (else the window is slept through). Names in ``tree`` count
    every process under their pids too (CPU only: shared memory would be counted twice)."""

    def cpu(name: str) -> float:
        read = tree_cpu_seconds if name in tree else cpu_seconds
        return sum(read(pid) for pid in pids[name])

    before = {name: cpu(name) for name in pids}
    t0 = time.monotonic()
    deadline = t0 + seconds
    if during is not None:
        during(deadline)
    time.sleep(max(0.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - t0
    return {
        name: Usage(
            cpu_pct=(cpu(name) - before[name]) / elapsed * 100.0,
            rss_mb=sum(status_kb(pid, "VmRSS") for pid in group) / 1024.0,
        )
        for name, group in pids.items()
    }
