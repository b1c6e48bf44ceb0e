"""Install, upgrade or remove the agent on a registered host over its SSH settings.

A deploy writes the zipapp built from this collector, the systemd unit, the env file (mode
0600: token and collector URL) and, when asked, the netconsole module-load file; it restarts
the unit and waits for the new agent's first batch. Running it again converges: unchanged
files are left alone, the token already on the host is kept when it is still the host's.
Without systemd (or with ``start=False``, or under another ``root``) nothing is started and
the report says so and lists the commands a start would run.

A deploy is a job, not a request: it commits on its own (the host's new token once the env
file holding it is on the host) and must not hold a transaction while the agent connects.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.orm import Session, sessionmaker

import agent
from collector.auth import new_token, token_matches
from collector.db import session_scope
from collector.deploy import layout
from collector.deploy.bundle import build_agent_bundle
from collector.deploy.heartbeat import wait_for_heartbeat
from collector.deploy.remote import DeployFailed, RemoteHost
from collector.deploy.report import InstallReport, UninstallReport
from collector.hosts import registry
from collector.models import Host as HostRow
from collector.netconsole.channel import parse_bind
from collector.remote.ssh import SSHClient
from collector.remote.targets import require_ssh_target
from collector.settings import Settings

MIN_PYTHON = (3, 10)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class DeployOptions:
    netconsole: bool = False
    netconsole_to: str | None = None  # HOST:PORT; default: the collector's host, its UDP port
    collector_url: str | None = None  # what the agent posts to; default: settings.base_url
    start: bool = True
    root: str = "/"
    wait_s: float = 60.0


def _bundle() -> bytes:
    with tempfile.TemporaryDirectory(prefix="freezewatch-deploy-") as tmp:
        return build_agent_bundle(Path(tmp) / "agent.pyz").read_bytes()


def _check_python(facts: dict[str, Any]) -> str:
    version = facts["python_version"]
    if not facts["python3"] or not version:
        raise DeployFailed("python3 is not on the host's PATH; the agent needs Python >= 3.10")
    if tuple(int(p) for p in version.split(".")) < MIN_PYTHON:
        raise DeployFailed(f"the host's python3 is {version}; the agent needs Python >= 3.10")
    return str(facts["python3"])


def _not_started(options: DeployOptions, facts: dict[str, Any]) -> str | None:
    """Why the agent will not be started, every reason that holds; None: it will be."""
    reasons = []
    if options.root not in ("", "/"):
        reasons.append(f"installed under {options.root}")
    if not options.start:
        reasons.append("--no-start")
    if not facts["systemd"]:
        reasons.append("the host does not run systemd (no /run/systemd/system)")
    return f"not started: {'; '.join(reasons)}" if reasons else None


def _systemctl_not_run(options: DeployOptions) -> str:
    if options.root not in ("", "/"):
        return f"systemctl not run: removed under {options.root}"
    return "systemctl not run: the host does not run systemd (no /run/systemd/system)"


def _settings_for(
    host: HostRow, settings: Settings, options: DeployOptions, warnings: list[str]
) -> dict[str, str]:
    """The agent's env-file settings (token aside), and warnings about them."""
    url = (options.collector_url or settings.base_url).rstrip("/")
    collector_host = urlsplit(url).hostname or ""
    if collector_host in LOOPBACK and host.ssh_host not in LOOPBACK:
        warnings.append(
            f"the agent will post to {url}, a loopback address on the host: set "
            "FREEZEWATCH_PUBLIC_URL (or --collector-url) to an address the host reaches"
        )
    values = {"COLLECTOR": url, "HOST_NAME": host.name}
    if host.vllm_url:
        values["VLLM_URL"] = host.vllm_url
    if options.netconsole:
        port = parse_bind(settings.netconsole_bind)[1] if settings.netconsole_bind else 6666
        values["NETCONSOLE"] = options.netconsole_to or f"{collector_host}:{port}"
        if not settings.netconsole_bind:
            warnings.append("this collector has no FREEZEWATCH_NETCONSOLE_BIND: nothing listens")
        if not host.netconsole_from:
            warnings.append(
                "the collector drops netconsole from unknown senders: add-host "
                f"{host.name} --update --netconsole-from <the host's address>"
            )
    return values


def deploy_agent(
    factory: sessionmaker[Session],
    *,
    name: str,
    ssh: SSHClient,
    settings: Settings,
    options: DeployOptions,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> InstallReport:
    """Install or upgrade the agent on host ``name``; returns the report (see the README)."""
    began = clock()
    warnings: list[str] = []
    with session_scope(factory) as session:
        row = registry.get_host(session, name=name)
        target = require_ssh_target(row)
        host_id, token_hash = row.id, row.token_hash
        values = _settings_for(row, settings, options, warnings)
    host = RemoteHost(ssh=ssh, target=target)
    facts = host.facts()
    python = _check_python(facts)
    on_host = layout.parse_env(host.read(layout.under(options.root, layout.ENV_PATH)) or "")
    token = on_host.get("TOKEN", "")
    kept = token_matches(token, token_hash)
    token = token if kept else new_token("fwh")
    env = layout.env_file({**values, "TOKEN": token}, host=name)
    files = layout.install_files(
        root=options.root, bundle=_bundle(), env=env, python=python, netconsole=options.netconsole
    )
    modules_load = layout.under(options.root, layout.MODULES_LOAD_PATH)
    before = host.hashes([f.path for f in files] + [modules_load])
    written = []
    for file in files:  # the env file last: the token goes live with everything else in place
        changed = before.get(file.path) != file.sha256
        if changed:
            host.put(file)
        written.append({"path": file.path, "mode": f"{file.mode:04o}", "bytes": len(file.data),
                        "sha256": file.sha256, "changed": changed})  # fmt: skip
    # A deploy without --netconsole after one with it: the module no longer loads at boot.
    stale = [] if options.netconsole or modules_load not in before else [modules_load]
    removed = host.remove(stale, []) if stale else []
    if not kept:
        with session_scope(factory) as session:
            registry.rotate_token(session, host=registry.get_host(session, name=name), token=token)
    reason = _not_started(options, facts)
    steps = ((layout.LOAD_NETCONSOLE,) if options.netconsole else ()) + layout.START
    start = [[*host.sudo, *argv] for argv in steps]
    if reason is None:
        if options.netconsole:
            try:
                host.run(layout.LOAD_NETCONSOLE)
            except DeployFailed as exc:  # the agent runs without it, and reports why
                warnings.append(f"netconsole module not loaded: {exc.detail}")
        for argv in layout.START:
            host.run(argv)
    heartbeat, agent_log = None, None
    if reason is None:
        heartbeat = wait_for_heartbeat(
            factory, host_id=host_id, since=began, timeout_s=options.wait_s, clock=clock,
            sleep=sleep,
        )  # fmt: skip
        if heartbeat is None:
            warnings.append(f"no batch from the new agent within {options.wait_s:.0f} s")
            journal = ["journalctl", "-u", layout.UNIT, "-n", "20", "--no-pager"]
            agent_log = host.run(journal, check=False).splitlines()
    return InstallReport.model_validate({
        "host": name,
        "action": "install",
        "host_facts": facts,
        "bundle": {"version": agent.__version__, "sha256": files[0].sha256,
                   "bytes": len(files[0].data)},
        "token": "kept" if kept else "issued",
        "collector_url": values["COLLECTOR"],
        "files": written,
        "removed": removed,
        "changed": any(f["changed"] for f in written) or bool(removed),
        "started": reason is None,
        "not_started": reason,
        "would_run": [] if reason is None else [shlex.join(argv) for argv in start],
        "commands": host.commands,
        "heartbeat": heartbeat,
        "agent_log": agent_log,
        "warnings": warnings,
    })  # fmt: skip


def uninstall_agent(
    factory: sessionmaker[Session], *, name: str, ssh: SSHClient, options: DeployOptions
) -> UninstallReport:
    """Stop and disable the unit, remove every file a deploy writes; keeps the state dir."""
    with session_scope(factory) as session:
        target = require_ssh_target(registry.get_host(session, name=name))
    host = RemoteHost(ssh=ssh, target=target)
    facts = host.facts()
    env_path = layout.under(options.root, layout.ENV_PATH)
    on_host = layout.parse_env(host.read(env_path) or "")
    live = options.root in ("", "/") and facts["systemd"]
    steps: list[list[str]] = [list(argv) for argv in layout.STOP]
    if on_host.get("NETCONSOLE") and facts["python3"]:
        steps.append([facts["python3"], layout.AGENT_PATH, "--netconsole-remove"])
    if live:
        for argv in steps:
            host.run(argv, check=False)  # a unit already gone is not an error
    paths = layout.installed_paths(options.root)
    removed = host.remove(paths, layout.installed_dirs(options.root))
    if live:
        for forget in layout.FORGET:
            host.run(forget)
    would = [] if live else [[*host.sudo, *a] for a in [*steps, *layout.FORGET]]
    return UninstallReport.model_validate(
        {
            "host": name,
            "action": "uninstall",
            "host_facts": facts,
            "removed": removed,
            "kept": [layout.under(options.root, layout.STATE_DIR)],
            "not_run": None if live else _systemctl_not_run(options),
            "would_run": [shlex.join(argv) for argv in would],
            "commands": host.commands,
        }
    )
