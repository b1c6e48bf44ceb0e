"""The agent's one settings object: argparse flags, each also readable from FREEZEWATCH_AGENT_*."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ENV_PREFIX = "FREEZEWATCH_AGENT_"
DOCKER_SOCKET = "/var/run/docker.sock"
DEFAULT_LABEL = "com.nvidia.nemoclaw.managed-vllm=true"
PSTORE_DIRS = (Path("/sys/fs/pstore"), Path("/var/lib/systemd/pstore"))
_TRUE = {"1", "true", "yes", "on"}


class AgentConfig(NamedTuple):
    """Everything the agent needs from its command line / environment. (A NamedTuple: the
    ``dataclasses`` module loads ``inspect`` and ``ast``, 1.2 MB of the agent's RSS; the
    modules it loads at every start use none.)"""

    collector: str
    token: str
    host_name: str
    interval: float = 1.0
    proc_root: Path = Path("/proc")
    kmsg: Path = Path("/dev/kmsg")
    state_dir: Path = Path("/var/lib/freezewatch")
    spool_max_mb: float = 256.0
    timeout: float = 5.0  # seconds per HTTP request; a hung collector must not stall sampling
    no_gpu: bool = False
    vllm_url: tuple[str, ...] = ()
    docker_socket: str = DOCKER_SOCKET
    container_label: str | None = DEFAULT_LABEL  # None: choose containers by name only
    container_name: tuple[str, ...] = ()
    vllm_log: tuple[Path, ...] = ()
    journal_unit: tuple[str, ...] = ()
    canary_interval: float = 10.0  # 0 disables the canary
    netconsole: str | None = None  # HOST:PORT of the collector's UDP receiver
    netconsole_remove: bool = False
    netconsole_name: str = "freezewatch"
    sys_root: Path = Path("/")
    journalctl: str = "journalctl"  # used for --journal-unit and the previous boot's catch-up
    pstore_dir: tuple[Path, ...] = PSTORE_DIRS
    guard: Path | None = None  # rules file (agent.guard); no rules: the guard is off
    guard_rule: tuple[str, ...] = ()
    guard_action: tuple[str, ...] = ()
    guard_cooldown: str | None = None
    guard_dry_run: bool = False
    guard_check: bool = False


class _Option(NamedTuple):
    flag: str  # "--host-name"; the env name and the AgentConfig field derive from it
    type: Any
    help: str
    required: bool = False
    default: Any = None
    repeat: bool = False  # flag repeatable; the env variable is comma-separated
    switch: bool = False  # store_true; the env variable is 1/true/yes/on
    empty_ok: bool = False  # an empty value (flag or env) is kept as "" (e.g. "no label")

    @property
    def field(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.field.upper()


# Later sources append their flags here (and a field to AgentConfig): e.g. --vllm-url.
OPTIONS: list[_Option] = [
    _Option("--collector", str, "collector base URL, e.g. http://collector:8080", required=True),
    _Option("--token", str, "this host's agent token", required=True),
    _Option("--host-name", str, "host name sent to the collector (default: hostname)"),
    _Option("--interval", float, "seconds between samples / heartbeats", default=1.0),
    _Option("--proc-root", Path, "procfs root", default=Path("/proc")),
    _Option("--kmsg", Path, "/dev/kmsg, or a file/FIFO of kmsg records", default=Path("/dev/kmsg")),
    _Option("--state-dir", Path, "state and spool directory", default=Path("/var/lib/freezewatch")),
    _Option("--spool-max-mb", float, "disk spool bound in MiB", default=256.0),
    _Option("--timeout", float, "HTTP request timeout in seconds", default=5.0),
    _Option("--no-gpu", bool, "do not load NVML (GPU source off)", switch=True, default=False),
    _Option("--vllm-url", str, "vLLM base URL to poll /health and /metrics", repeat=True),
    _Option("--docker-socket", str, "Docker Engine API socket", default=DOCKER_SOCKET),
    _Option(
        "--container-label",
        str,
        "containers to watch by label (empty: by name only)",
        default=DEFAULT_LABEL,
        empty_ok=True,
    ),
    _Option("--container-name", str, "container to watch by exact name", repeat=True),
    _Option("--vllm-log", Path, "vLLM log file to follow (vLLM outside Docker)", repeat=True),
    _Option("--journal-unit", str, "systemd unit whose journal to follow as vLLM log", repeat=True),
    _Option("--canary-interval", float, "seconds between kmsg canaries (0: off)", default=10.0),
    _Option("--netconsole", str, "set up a kernel netconsole target to HOST:PORT (UDP)"),
    _Option("--netconsole-remove", bool, "remove the netconsole target", switch=True),
    _Option("--netconsole-name", str, "configfs netconsole target name", default="freezewatch"),
    _Option("--sys-root", Path, "root holding sys/kernel/config", default=Path("/")),
    _Option("--journalctl", str, "journalctl executable", default="journalctl"),
    _Option(
        "--pstore-dir",
        Path,
        "pstore directory to ship new files from (catch-up)",
        repeat=True,
        default=PSTORE_DIRS,
    ),
    _Option("--guard", Path, "guard rules file (JSON or YAML); the guard is off without rules"),
    _Option(
        "--guard-rule", str, "a guard rule, e.g. 'mem_available_below: 4GiB for 2s'", repeat=True
    ),
    _Option(
        "--guard-action", str, "a guard action, e.g. 'docker_stop: {timeout: 10s}'", repeat=True
    ),
    _Option("--guard-cooldown", str, "at most one guard firing per this long (default 5m)"),
    _Option("--guard-dry-run", bool, "the guard only reports what it would do", switch=True),
    _Option("--guard-check", bool, "print the guard's rules as read, then exit", switch=True),
]


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Flags win over FREEZEWATCH_AGENT_* variables, which win over defaults."""
    environ = {} if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="freezewatch-agent",
        description="Stream kernel lines and host samples to a freezewatch collector.",
        epilog=f"Every flag can also be set as {ENV_PREFIX}<FLAG> (e.g. {ENV_PREFIX}HOST_NAME).",
    )
    for opt in OPTIONS:
        help_text = f"{opt.help}{_default_text(opt)} [{opt.env}]"
        if opt.switch:
            parser.add_argument(
                opt.flag, dest=opt.field, action="store_true", default=None, help=help_text
            )
        elif opt.repeat:
            parser.add_argument(
                opt.flag, dest=opt.field, type=opt.type, action="append", help=help_text
            )
        else:
            parser.add_argument(opt.flag, dest=opt.field, type=opt.type, help=help_text)
    args = parser.parse_args(list(argv) if argv is not None else None)
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        value = getattr(args, opt.field)
        if value is None and (
            environ.get(opt.env, "") != "" or (opt.empty_ok and opt.env in environ)
        ):
            value = _from_env(opt, environ[opt.env], parser)
        if value is None:
            if opt.required and not _one_shot(args, environ):
                parser.error(f"{opt.flag} (or {opt.env}) is required")
            value = opt.default
        values[opt.field] = value
    if values["host_name"] is None:
        values["host_name"] = socket.gethostname()
    if values["interval"] <= 0:
        parser.error("--interval must be positive")
    if values["canary_interval"] < 0:
        parser.error("--canary-interval must be >= 0")
    for opt in OPTIONS:
        if opt.repeat:
            values[opt.field] = tuple(values[opt.field] or ())
        if opt.switch:
            values[opt.field] = bool(values[opt.field])
    values["container_label"] = values["container_label"] or None
    known = set(AgentConfig._fields)
    return AgentConfig(**{k: v for k, v in values.items() if k in known})


def _default_text(opt: _Option) -> str:
    """`` (default: X)`` for ``--help``, where the default is not already in the help text."""
    if opt.switch or opt.default is None or "default" in opt.help:
        return ""
    shown = ", ".join(map(str, opt.default)) if opt.repeat else opt.default
    return f" (default: {shown})"


def _from_env(opt: _Option, raw: str, parser: argparse.ArgumentParser) -> Any:
    if opt.switch:
        return raw.strip().lower() in _TRUE
    try:
        if opt.repeat:
            return [opt.type(part.strip()) for part in raw.split(",") if part.strip()] or None
        return opt.type(raw)
    except ValueError:
        parser.error(f"{opt.env}: invalid {opt.type.__name__} value {raw!r}")


def _one_shot(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    """``--netconsole-remove`` and ``--guard-check`` act and exit: no collector or token."""
    return any(
        bool(getattr(args, name)) or environ.get(ENV_PREFIX + name.upper(), "").lower() in _TRUE
        for name in ("netconsole_remove", "guard_check")
    )
