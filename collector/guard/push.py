"""Pushing a rules file to a host over SSH: checked here with the agent's own parser, written
on the host atomically (temp file + rename, mode 0600), then the agent restarted to read it.

The file is written as JSON (the agent reads JSON with the standard library); a YAML rules
file is converted here. The agent reads it only when started with ``--guard PATH``
(``FREEZEWATCH_AGENT_GUARD=PATH`` in ``/etc/freezewatch/agent.env``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml

from agent.guard.rules import GuardConfig, GuardConfigError, parse_config
from collector.errors import BadRequest
from collector.remote.connect import SSHTarget
from collector.remote.ssh import SSHClient

log = logging.getLogger(__name__)

DEFAULT_PATH = "/etc/freezewatch/guard.json"
RESTART_ARGV = ("systemctl", "restart", "freezewatch-agent")
# $1: the path, $2: the content; nothing of either reaches a shell unquoted.
WRITE_SCRIPT = (
    'umask 077 && mkdir -p "$(dirname "$1")" && printf "%s" "$2" > "$1.tmp" && mv "$1.tmp" "$1"'
)
TIMEOUT_S = 30.0


def read_rules(path: Path) -> tuple[dict[str, Any], GuardConfig]:
    """The rules document in ``path`` (YAML or JSON) and what the agent would make of it."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BadRequest(f"{path}: {exc}") from exc
    try:
        return document, parse_config(document, source=str(path))
    except GuardConfigError as exc:
        raise BadRequest(f"{path}: {exc}") from exc


def push_rules(
    ssh: SSHClient,
    target: SSHTarget,
    *,
    document: dict[str, Any],
    path: str = DEFAULT_PATH,
    restart: bool = True,
    sudo: bool = False,
    restart_argv: tuple[str, ...] = RESTART_ARGV,
) -> list[dict[str, Any]]:
    """Write ``document`` as JSON to ``path`` on the host, then restart the agent; the steps
    ``{"step", "ok", "detail"}`` in order (a failed write skips the restart)."""
    content = json.dumps(document, indent=2, sort_keys=True) + "\n"
    prefix = ["sudo", "-n"] if sudo else []
    steps = []
    argv = [*prefix, "sh", "-c", WRITE_SCRIPT, "freezewatch-guard", path, content]
    commands = [("write", argv)] + ([("restart", [*prefix, *restart_argv])] if restart else [])
    for step, command in commands:
        result = ssh.run(target, command, timeout=TIMEOUT_S)
        detail = result.stderr.decode(errors="replace").strip()[-500:] or (
            f"exit status {result.exit_status}" if not result.timed_out else "timed out"
        )
        steps.append({"step": step, "ok": result.ok, "detail": detail})
        log.info("guard push to %s: %s ok=%s %s", target.host, step, result.ok, detail)
        if not result.ok:
            break
    return steps
