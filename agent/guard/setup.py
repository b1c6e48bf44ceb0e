"""From the agent's flags to a running guard (or to the report of why there is none)."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from typing import Any

from agent.config import AgentConfig
from agent.guard.actions import ActionContext
from agent.guard.engine import ActionRunner, Guard, OnEvent
from agent.guard.rules import GuardConfig, GuardConfigError, parse_config
from agent.guard.rulesfile import RulesFileError, load_rules_file, parse_document

log = logging.getLogger(__name__)


def read_guard_config(config: AgentConfig) -> GuardConfig | None:
    """The guard the flags describe: ``--guard FILE`` plus ``--guard-rule``/``--guard-action``
    texts (appended to the file's), or None when no rule is configured (the guard is off)."""
    if config.guard is None and not config.guard_rule:
        return None
    data: Any = load_rules_file(config.guard) if config.guard is not None else {}
    if not isinstance(data, dict):
        raise GuardConfigError(f"{config.guard}: a mapping with rules: and actions:")
    data = dict(data)
    for key, texts in (("rules", config.guard_rule), ("actions", config.guard_action)):
        flags = [parse_document(t, name=f"--guard-{key[:-1]} {t!r}") for t in texts]
        data[key] = [*(data.get(key) or []), *flags]
    if config.guard_cooldown is not None:
        data["cooldown"] = config.guard_cooldown
    source = str(config.guard) if config.guard is not None else "flags"
    return parse_config(data, dry_run=config.guard_dry_run, source=source)


def file_crc32(config: AgentConfig) -> str | None:
    """Which version of the file runs (zlib is loaded anyway; hashlib would cost 0.6 MB RSS)."""
    try:
        return f"{zlib.crc32(config.guard.read_bytes()):08x}" if config.guard else None
    except OSError:
        return None


def build_guard(
    config: AgentConfig,
    on_event: OnEvent,
    *,
    context: ActionContext | None = None,
    wall: Callable[[], float] | None = None,
) -> tuple[Guard | None, dict[str, Any]]:
    """(the guard or None, what ``agent_started`` reports as ``guard``); a bad rules file is
    reported (``source_error``, state ``error``) and leaves the guard off, never the agent dead."""
    try:
        guard_config = read_guard_config(config)
    except (RulesFileError, GuardConfigError) as exc:
        log.error("guard off: %s", exc)
        on_event("source_error", {"source": "guard", "error": str(exc)})
        return None, {"state": "error", "error": str(exc), "source": str(config.guard or "flags")}
    if guard_config is None:
        return None, {"state": "off"}
    context = context or ActionContext(
        docker_socket=config.docker_socket,
        container_names=config.container_name,
        container_label=config.container_label,
        proc_root=config.proc_root,
    )
    state_path = config.state_dir / "guard.json"
    runner = None if guard_config.dry_run else ActionRunner(context, on_event, state_path)
    extra: dict[str, Any] = {"wall": wall} if wall is not None else {}
    guard = Guard(guard_config, on_event=on_event, runner=runner, state_path=state_path, **extra)
    summary = {**guard_config.summary(), "crc32": file_crc32(config)}
    log.info("guard %s: %s; actions: %s", summary["state"], summary["rules"], summary["actions"])
    return guard, summary
