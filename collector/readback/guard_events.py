"""The agent guard's firings by range, each with its actions' results once they arrived.

A firing (``guard_fired``, sent the moment a rule tripped) and its result (``guard_result``,
sent when the actions ended) are two agent events joined by ``fire_id``. Shape, sorted by
time: ``{"ts", "kind": "guard", "fire_id", "rule", "values", "phase", "dry_run", "actions",
"results": [{"action", "ok", "detail", "ms"}] | null, "tripped_at", "text"}``; ``tripped_at``
is the agent's clock when the rule tripped, ``text`` says it all in a line.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import AgentEvent

MAX_FIRINGS = 500
# A result follows its firing by the actions' timeouts (a stop's grace, then a kill).
RESULT_WITHIN_S = 900.0


def firing_text(data: dict[str, Any]) -> str:
    what = "would have run" if data.get("dry_run") else "ran"
    actions = ", ".join(str(a) for a in data.get("actions") or []) or "nothing"
    return f"guard {data.get('rule')}: {what} {actions}"


def guard_firings(
    session: Session, *, host_id: int, since: float, until: float, limit: int = MAX_FIRINGS
) -> list[dict[str, Any]]:
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
    return out
