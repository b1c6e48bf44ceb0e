"""The agent's one settings object: argparse flags, each also readable from FREEZEWATCH_AGENT_*."""

from __future__ import annotations

import argparse
import dataclasses
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_PREFIX = "FREEZEWATCH_AGENT_"


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent needs from its command line / environment."""

    collector: str
    token: str
    host_name: str
    interval: float = 1.0
    proc_root: Path = Path("/proc")
    kmsg: Path = Path("/dev/kmsg")
    state_dir: Path = Path("/var/lib/freezewatch")
    spool_max_mb: float = 256.0
    timeout: float = 5.0  # seconds per HTTP request; a hung collector must not stall sampling


@dataclass(frozen=True)
class _Option:
    flag: str  # "--host-name"; the env name and the dataclass field derive from it
    type: Any
    help: str
    required: bool = False
    default: Any = None

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
        parser.add_argument(opt.flag, dest=opt.field, type=opt.type, help=f"{opt.help} [{opt.env}]")
    args = parser.parse_args(list(argv) if argv is not None else None)
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        value = getattr(args, opt.field)
        if value is None and environ.get(opt.env, "") != "":
            try:
                value = opt.type(environ[opt.env])
            except ValueError:
                parser.error(f"{opt.env}: invalid {opt.type.__name__} value {environ[opt.env]!r}")
        if value is None:
            if opt.required:
                parser.error(f"{opt.flag} (or {opt.env}) is required")
            value = opt.default
        values[opt.field] = value
    if values["host_name"] is None:
        values["host_name"] = socket.gethostname()
    if values["interval"] <= 0:
        parser.error("--interval must be positive")
    known = {f.name for f in dataclasses.fields(AgentConfig)}
    return AgentConfig(**{k: v for k, v in values.items() if k in known})
