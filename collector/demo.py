"""`freezewatch-collector demo`: a collector on SQLite plus an agent watching this machine.

``--simulated-host NAME`` registers NAME as a simulated host; ``--sim-command`` runs whatever
simulates it (the Makefile passes the test tooling's simhost; this module never imports it).

Everything lives in one data directory, so a second run reuses the host, its token and the
admin token instead of piling up registrations.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from collector import db
from collector.auth import host_for_token
from collector.errors import NotFound
from collector.hosts import registry


def _secret_file(path: Path, make: str) -> str:
    if path.exists():
        return path.read_text().strip()
    path.write_text(make + "\n")
    path.chmod(0o600)
    return make


def register_hosts(db_url: str, data: Path, names: dict[str, bool]) -> dict[str, str]:
    """Agent token per host name (name → simulated), kept in ``data/<file>`` across runs.

    A kept token that the database no longer accepts (the DB was deleted, or the token rotated)
    is replaced, so a second ``make demo`` never starts an agent that only gets 401s.
    """
    tokens: dict[str, str] = {}
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            for name, simulated in names.items():
                token_file = data / _token_file_name(name, simulated)
                saved = token_file.read_text().strip() if token_file.exists() else ""
                try:
                    host = registry.get_host(session, name=name)
                except NotFound:
                    _host, token = registry.create_host(session, name=name, simulated=simulated)
                else:
                    host.simulated = simulated
                    owner = host_for_token(session, token=saved) if saved else None
                    token = saved if owner is host else registry.rotate_token(session, host=host)
                if token != saved:
                    token_file.write_text(token + "\n")
                    token_file.chmod(0o600)
                tokens[name] = token
    finally:
        engine.dispose()
    return tokens


def _token_file_name(name: str, simulated: bool) -> str:
    # "agent-token" for this machine's host, as earlier demo data dirs have it
    return f"sim-token-{name}" if simulated else "agent-token"


def expand(argv: list[str], values: dict[str, str], tokens: dict[str, str]) -> list[str]:
    """Fill ``{url}`` ``{port}`` ``{data}`` ``{python}`` and ``{token:NAME}`` in each argument."""
    out = []
    for arg in argv:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        for name, token in tokens.items():
            arg = arg.replace("{token:" + name + "}", token)
        out.append(arg)
    return out


def freeze_plan(argv: list[str]) -> str | None:
    """What a ``tests.support.simhost`` command will show and when (its freeze flags, defaulted as
    simhost defaults them), so a new user knows how long to wait; None for another command."""
    if "tests.support.simhost" not in argv:
        return None

    def flag(option: str, default: float) -> float:
        return float(_option(argv, option) or default)

    name = _option(argv, "--host-name") or "simulated host"
    every = flag("--freeze-every", 180.0)
    first = flag("--first-freeze", min(45.0, every))
    away = flag("--freeze-seconds", 20.0)
    if first <= 0:
        return f"  {name}: never freezes (--freeze-every 0)\n"
    later = f", then every ~{every / 60:g} min of uptime" if every > 0 else ", once"
    return (
        f"  {name}: first freeze (a soft lockup, then silence) after ~{first:g} s{later};"
        f" it stays away {away:g} s and comes back on a new boot (rebooted)\n"
    )


def campaign_plan(argv: list[str], url: str) -> str | None:
    """What a ``tests.support.simlab_demo`` command will show and when (timed on this project's
    2-core machine); None for another command."""
    if "tests.support.simlab_demo" not in argv:
        return None
    name = _option(argv, "--host-name") or "the lab host"
    return (
        f"  {name}: a matrix campaign (2 profiles x 2 repetitions, a reboot before each start)"
        " from the start (its first vLLM start ~15 s in); the host freezes once during the second"
        " unit (~1 min in) and the run goes on; it ends after ~3 min with k-of-N verdicts on"
        f" {url}/matrix\n"
    )


def _option(argv: list[str], option: str) -> str | None:
    at = argv.index(option) + 1 if option in argv else len(argv)
    return argv[at] if at < len(argv) else None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as uvicorn binds: a previous run's TIME_WAIT connections do not count as "in use"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(1)
        except OSError:
            return False
    return True


def kmsg_source(data: Path) -> tuple[str, str]:
    """(path, note): /dev/kmsg if this user may read it, else a file in the data dir."""
    try:
        with open("/dev/kmsg", "rb"):
            return "/dev/kmsg", "this machine's kernel log"
    except OSError as exc:
        fallback = data / "kmsg"
        fallback.touch()
        return str(fallback), f"/dev/kmsg not readable ({exc.strerror}); following {fallback}"


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


def run_demo(
    *,
    data_dir: str,
    port: int,
    sim_commands: list[str],
    simulated_hosts: list[str] | None = None,
) -> int:
    """Run until Ctrl-C/SIGTERM (exit 0) or until the collector or agent dies (exit 1)."""
    data = Path(data_dir).resolve()
    url = f"http://127.0.0.1:{port}"
    if not port_free(port):
        print(
            f"demo: port {port} on 127.0.0.1 is in use (another demo running?); "
            f"choose another one, e.g. `make demo PORT={port + 1}` or `--port {port + 1}`",
            file=sys.stderr,
        )
        return 2
    try:
        commands = [json.loads(raw) for raw in sim_commands]
    except ValueError as exc:
        print(f"demo: --sim-command is not a JSON argv: {exc}", file=sys.stderr)
        return 2
    if not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in commands):
        print("demo: --sim-command must be a JSON list of strings", file=sys.stderr)
        return 2
    data.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{data / 'freezewatch.db'}"
    db.migrate(db_url)
    admin_token = _secret_file(data / "admin-token", f"fwa_{secrets.token_urlsafe(32)}")
    host_name = socket.gethostname()
    names = {host_name: False, **dict.fromkeys(simulated_hosts or [], True)}
    tokens = register_hosts(db_url, data, names)
    values = {"url": url, "port": str(port), "data": str(data), "python": sys.executable}
    commands = [expand(c, values, tokens) for c in commands]

    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": db_url,
        "FREEZEWATCH_ADMIN_TOKEN": admin_token,
        "FREEZEWATCH_BIND": "127.0.0.1",
        "FREEZEWATCH_PORT": str(port),
        "FREEZEWATCH_DATA_DIR": str(data / "collector-data"),  # matrix runs' request records
        "FREEZEWATCH_DEMO_DATA": str(data),
        "FREEZEWATCH_DEMO_URL": url,
    }
    procs: list[subprocess.Popen[bytes]] = []
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise KeyboardInterrupt

    # Installed explicitly: a shell starting us in the background leaves SIGINT ignored.
    previous = {sig: signal.signal(sig, on_term) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # Own process group: Ctrl-C reaches the agents first, which flush to a collector that
        # is still up; the collector is stopped last, by us (and dies with us: PDEATHSIG).
        collector = subprocess.Popen(
            [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
            env=env,
            preexec_fn=_own_group_dying_with_parent(),
        )
        procs.append(collector)
        if not _wait_healthy(url, collector):
            print("demo: the collector did not come up; see its output above", file=sys.stderr)
            return 1
        kmsg, kmsg_note = kmsg_source(data)
        agent_argv = [
            sys.executable,
            "-m",
            "agent",
            "--collector",
            url,
            "--host-name",
            host_name,
            "--kmsg",
            kmsg,
            "--state-dir",
            str(data / "agent-state"),
        ]
        if kmsg != "/dev/kmsg":
            agent_argv += ["--canary-interval", "0"]  # canaries are /dev/kmsg writes
        procs.append(
            subprocess.Popen(agent_argv, env={**env, "FREEZEWATCH_AGENT_TOKEN": tokens[host_name]})
        )
        sims = [subprocess.Popen(argv, env=env) for argv in commands]
        procs += sims
        sim_lines = "".join(f"  simulated:    {name}\n" for name in simulated_hosts or [])
        plans = [p for c in commands for p in (freeze_plan(c), campaign_plan(c, url)) if p]
        plan = "".join(plans)
        watch = (
            f"What you will see:\n{plan}  each freeze opens an incident on {url}/freezes; its"
            " page lists the kernel events before it, newest first.\n"
            if plan
            else ""
        )
        print(
            f"\nfreezewatch demo running\n  UI:           {url}\n"
            f"  admin token:  {admin_token}\n  host:         {host_name} ({kmsg_note})\n"
            f"{sim_lines}  data:         {data}\n{watch}Press Ctrl-C to stop.\n",
            flush=True,
        )
        reported: set[int] = set()
        while all(p.poll() is None for p in procs[:2]):
            for sim in sims:
                if sim.poll() is not None and sim.pid not in reported:
                    reported.add(sim.pid)
                    print(f"demo: {commands[sims.index(sim)][:4]} exited {sim.returncode}")
            time.sleep(0.5)
        print("demo: a process exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        stopping = True
        print("\ndemo: stopping", flush=True)
        return 0
    finally:
        stopping = True
        _stop_all(procs)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _own_group_dying_with_parent() -> Callable[[], None]:
    """A preexec_fn: new process group, and SIGTERM when the demo dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        libc = None

    def setup() -> None:
        os.setpgid(0, 0)
        if libc is not None:
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return setup


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Agents and simulators first (they flush to a collector still up), the collector last."""
    for group in (procs[1:], procs[:1]):
        for proc in group:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in group:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
