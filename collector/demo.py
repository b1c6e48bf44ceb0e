"""`freezewatch-collector demo`: a collector on SQLite plus an agent watching this machine.

Everything lives in one data directory, so a second run reuses the host, its token and the
admin token instead of piling up registrations.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from collector import db
from collector.errors import NotFound
from collector.services import hosts


def _secret_file(path: Path, make: str) -> str:
    if path.exists():
        return path.read_text().strip()
    path.write_text(make + "\n")
    path.chmod(0o600)
    return make


def _host_token(db_url: str, name: str, token_file: Path) -> str:
    if token_file.exists():
        return token_file.read_text().strip()
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            try:
                host = hosts.get_host(session, name=name)
                token = hosts.rotate_token(session, host=host)
            except NotFound:
                _host, token = hosts.create_host(session, name=name)
    finally:
        engine.dispose()
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return token


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def run_demo(*, data_dir: str, port: int, sim_commands: list[str]) -> int:
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{data / 'freezewatch.db'}"
    url = f"http://127.0.0.1:{port}"
    db.migrate(db_url)
    admin_token = _secret_file(data / "admin-token", f"fwa_{secrets.token_urlsafe(32)}")
    host_name = socket.gethostname()
    host_token = _host_token(db_url, host_name, data / "agent-token")

    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": db_url,
        "FREEZEWATCH_ADMIN_TOKEN": admin_token,
        "FREEZEWATCH_BIND": "127.0.0.1",
        "FREEZEWATCH_PORT": str(port),
        "FREEZEWATCH_DEMO_DATA": str(data),
        "FREEZEWATCH_DEMO_URL": url,
    }
    procs: list[subprocess.Popen[bytes]] = []
    collector = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"], env=env
    )
    procs.append(collector)
    try:
        if not _wait_healthy(url, collector):
            print("demo: the collector did not come up; see its output above", file=sys.stderr)
            return 1
        kmsg = "/dev/kmsg" if os.access("/dev/kmsg", os.R_OK) else str(data / "kmsg")
        if kmsg != "/dev/kmsg":
            Path(kmsg).touch()
        agent_argv = [
            sys.executable,
            "-m",
            "agent",
            "--collector",
            url,
            "--token",
            host_token,
            "--host-name",
            host_name,
            "--kmsg",
            kmsg,
            "--state-dir",
            str(data / "agent-state"),
        ]
        procs.append(subprocess.Popen(agent_argv, env=env))
        for raw in sim_commands:
            procs.append(subprocess.Popen(json.loads(raw), env=env))
        print(
            f"\nfreezewatch demo running\n  UI:           {url}\n"
            f"  admin token:  {admin_token}\n  host:         {host_name} (agent on {kmsg})\n"
            f"  data:         {data}\nPress Ctrl-C to stop.\n",
            flush=True,
        )
        while all(p.poll() is None for p in procs[:2]):
            time.sleep(0.5)
        print("demo: a process exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ndemo: stopping", flush=True)
        return 0
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
