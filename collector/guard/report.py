"""What each agent says its guard is (``agent_started`` data ``guard``), kept on the host."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer

from agent.wire import GUARD_STATES
from collector.models import Host
from collector.schemas import OutModel, WireEvent

# What the agent reports is kept as it said it, within these bounds (it is agent input).
MAX_ITEMS = 50
MAX_TEXT = 500


def _bounded(report: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("rules", "actions"):
        items = report.get(key)
        if isinstance(items, list):
            out[key] = [str(item)[:MAX_TEXT] for item in items[:MAX_ITEMS]]
    for key in ("source", "crc32", "error"):
        if isinstance(report.get(key), str):
            out[key] = report[key][:MAX_TEXT]
    if isinstance(report.get("cooldown_s"), int | float):
        out["cooldown_s"] = float(report["cooldown_s"])
    phases = report.get("phases")
    out["phases"] = [str(p)[:64] for p in phases[:MAX_ITEMS]] if isinstance(phases, list) else None
    return out


def note_guard_reports(host: Host, events: Iterable[WireEvent]) -> None:
    """Keep the newest report (by the agent's clock: a replayed old batch changes nothing)."""
    for event in events:
        report = event.data.get("guard") if event.kind == "agent_started" else None
        if not isinstance(report, dict):
            continue
        if host.guard_reported_at is not None and event.ts < host.guard_reported_at:
            continue
        state = report.get("state")
        host.guard_state = state if state in GUARD_STATES else "error"
        host.guard = _bounded(report)
        host.guard_reported_at = event.ts


class GuardOut(OutModel):
    """The guard as the host's agent last reported it (bounded; what it did not say is left
    out). ``state`` is armed, dry_run, off or error; null: no agent that knows the guard has
    reported (an older agent)."""

    state: str | None
    reported_at: float | None
    rules: list[str] | None = None
    actions: list[str] | None = None
    source: str | None = None
    crc32: str | None = None
    error: str | None = None
    cooldown_s: float | None = None
    phases: list[str] | None = None

    # Keys the agent did not report stay out, as they always have (not null). No return
    # annotation on purpose: pydantic would take it for the schema, the fields' own stays.
    @model_serializer(mode="wrap")
    def _as_reported(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}

    @classmethod
    def of(cls, host: Host) -> GuardOut:
        return cls.model_validate(
            {"state": host.guard_state, "reported_at": host.guard_reported_at, **(host.guard or {})}
        )
