"""The agent guard's firings by range (``GuardFiring``), each with its actions' results once
they arrived.

A firing (``guard_fired``, sent the moment a rule tripped) and its result (``guard_result``,
sent when the actions ended) are two agent events joined by ``fire_id``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator
from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import AgentEvent
from collector.schemas import (
    OutModel,
    ReportedList,
    ReportedNumber,
    ReportedObject,
    ReportedScalar,
    listed,
)

MAX_FIRINGS = 500
# A result follows its firing by the actions' timeouts (a stop's grace, then a kill).
RESULT_WITHIN_S = 900.0


def _results(value: Any) -> list[Any] | None:
    return None if value is None else [r for r in listed(value) if isinstance(r, dict)]


class GuardActionResult(OutModel):
    """How one of a firing's actions went, as the agent reported it (``ms`` it took)."""

    action: ReportedScalar
    ok: ReportedScalar
    detail: ReportedScalar
    ms: ReportedNumber


class GuardFiring(OutModel):
    """A guard rule that tripped (or matched, in dry-run): ``values`` the figures that tripped
    it, ``actions`` what it ran (or would have), ``results`` how they went (null until they
    arrived), ``tripped_at`` the agent's clock then, ``text`` all of it in a line."""

    ts: float
    kind: Literal["guard"]
    fire_id: ReportedScalar
    rule: ReportedScalar
    values: ReportedObject
    phase: ReportedScalar
    dry_run: bool
    actions: ReportedList
    results: Annotated[list[GuardActionResult] | None, BeforeValidator(_results)]
    tripped_at: ReportedNumber
    text: str


def firing_text(data: dict[str, Any]) -> str:
    what = "would have run" if data.get("dry_run") else "ran"
    actions = ", ".join(str(a) for a in data.get("actions") or []) or "nothing"
    return f"guard {data.get('rule')}: {what} {actions}"


def guard_firings(
    session: Session, *, host_id: int, since: float, until: float, limit: int = MAX_FIRINGS
) -> list[GuardFiring]:
    """The host's guard firings (dry-run matches included) with ``since <= ts <= until``."""
    fired = session.scalars(
        select(AgentEvent)
        .where(
            AgentEvent.host_id == host_id,
            AgentEvent.kind == "guard_fired",
            AgentEvent.ts >= since,
            AgentEvent.ts <= until,
        )
        .order_by(AgentEvent.ts, AgentEvent.id)
        .limit(limit)
    ).all()
    if not fired:
        return []
    results: dict[str, list[Any]] = {}
    for row in session.scalars(
        select(AgentEvent).where(
            AgentEvent.host_id == host_id,
            AgentEvent.kind == "guard_result",
            AgentEvent.ts >= fired[0].ts,
            AgentEvent.ts <= fired[-1].ts + RESULT_WITHIN_S,
        )
    ):
        results.setdefault(str(row.data.get("fire_id")), row.data.get("results") or [])
    out = []
    for row in fired:
        data = row.data or {}
        out.append(
            GuardFiring.model_validate(
                {
                    "ts": row.ts,
                    "kind": "guard",
                    "fire_id": data.get("fire_id"),
                    "rule": data.get("rule"),
                    "values": data.get("values") or {},
                    "phase": data.get("phase"),
                    "dry_run": bool(data.get("dry_run")),
                    "actions": data.get("actions") or [],
                    "results": results.get(str(data.get("fire_id"))),
                    "tripped_at": data.get("tripped_at"),
                    "text": firing_text(data),
                }
            )
        )
    return out
