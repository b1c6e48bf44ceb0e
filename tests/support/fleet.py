"""Real processes for fault tests: a collector (``python -m collector serve``) that can be
stopped, killed and started again on its port, and real agents on the fixture /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from collector import db
from collector.hosts import registry as hosts
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_PROC = ROOT / "tests" / "fixtures" / "proc"
ADMIN = "fwa_fleet-admin-fkAeAtOPyw5lsqDgRknb4DI4rx2g1ZDw"


def register(db_url: str, names: list[str]) -> dict[str, str]:
    """Migrate and add the hosts; name → agent token."""
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            return {name: hosts.create_host(session, name=name)[1] for name in names}
    finally:
        engine.dispose()


class CollectorProcess:
    """The collector (scheduler on) on a fixed port; ``env`` adds FREEZEWATCH_* settings."""

    def __init__(self, db_url: str, log: Path, **env: str) -> None:
        self.db_url = db_url
        self.port = free_port()
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            **os.environ,
            "FREEZEWATCH_DB_URL": self.db_url,
            "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
            "FREEZEWATCH_PORT": str(self.port),
            **self.env,
        }
        out = open(self.log, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )
        # 120 s, 5 s a try: in a full test run (load average 12) one took 35 s to import, then
        # answered no 1 s health check in 24 s while its 21 agents replayed their spools.
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)  # never left behind: a failed start is no fixture's
                raise AssertionError(f"collector did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM (a clean stop) or SIGKILL (a crash), and wait for it to be gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def api(self, path: str) -> object:
        # 30 s: a collector just restarted on a loaded machine (a full test run, load average
        # ~9 on 2 cores) took over 10 s to answer one GET while it caught up.
        r = httpx.get(self.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        r.raise_for_status()
        return r.json()


def start_agent(
    url: str,
    token: str,
    host: str,
    workdir: Path,
    *,
    interval: float = 1.0,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """A real agent following ``workdir/kmsg``, its state under ``workdir/state`` (or
    ``--state-dir`` in ``extra``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "kmsg").touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZEWATCH_AGENT_TOKEN": token}
    state = () if "--state-dir" in extra else ("--state-dir", str(workdir / "state"))
    argv = [
        sys.executable, "-m", "agent", "--collector", url, "--host-name", host,
        "--interval", str(interval), "--proc-root", str(FIXTURE_PROC),
        "--kmsg", str(workdir / "kmsg"), *state, "--no-gpu", "--container-label", "",
        "--canary-interval", "0", "--pstore-dir", str(workdir / "pstore"),
        "--journalctl", "false", "--docker-socket", str(workdir / "no-docker.sock"), *extra,
    ]  # fmt: skip
    log = open(workdir / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)


def append_kmsg(path: Path, kseqs: range, text: bytes = b"fleet record") -> None:
    with open(path, "ab") as f:
        for k in kseqs:
            f.write(b"6,%d,%d,-;%s %d\n" % (k, 1000 + k, text, k))


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL (works on stopped processes too) and reap."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.wait(10)
