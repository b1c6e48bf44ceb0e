"""A host's vLLM at a glance: current phase, health from the latest sample, startup plans."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Host, HostEvent, VllmPhase, VllmStart
from collector.readback.series import latest_sample
from collector.vllm.store import PLAN_COLUMNS, PLAN_EXTRAS

HEALTH_KEYS = (
    "url",
    "health",
    "health_ms",
    "running",
    "waiting",
    "kv_usage",
    "preemptions",
    "generation_tokens",
    "error",
)


def latest_vllm_phase(session: Session, *, host_id: int) -> str | None:
    """The phase of the host's latest vLLM server start (None before any)."""
    return session.scalar(
        select(VllmStart.phase)
        .where(VllmStart.host_id == host_id)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    )


def start_dict(start: VllmStart, phases: list[VllmPhase]) -> dict[str, Any]:
    """One server start: its plan fields, outcome, anomalies and phase timeline."""
    plan = start.plan or {}
    return {
        "id": start.id,
        "started_ts": start.started_ts,
        "phase": start.phase,
        "outcome": start.outcome,
        "error": start.error,
        **{name: getattr(start, name) for name in PLAN_COLUMNS},
        **{name: plan.get(name) for name in PLAN_EXTRAS},
        "anomalies": list(start.anomalies or []),
        "phases": [
            {"phase": p.phase, "ts": p.ts, "line_id": p.line_id}
            for p in sorted(phases, key=lambda p: (p.ts, p.id))
        ],
    }


def vllm_status(session: Session, *, host: Host, history: int = 20) -> dict[str, Any]:
    """The /hosts/{name}/vllm document; ``plans`` newest first, ``plan`` is the newest."""
    starts = list(
        session.scalars(
            select(VllmStart)
            .where(VllmStart.host_id == host.id)
            .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
            .limit(history)
        )
    )
    phases: dict[int, list[VllmPhase]] = {s.id: [] for s in starts}
    if starts:
        for phase in session.scalars(select(VllmPhase).where(VllmPhase.start_id.in_(phases))):
            phases[phase.start_id].append(phase)
    plans = [start_dict(s, phases[s.id]) for s in starts]

    sample = latest_sample(session, host_id=host.id)
    entries = (sample.data or {}).get("vllm") if sample is not None else None
    health = [
        {key: e.get(key) for key in HEALTH_KEYS} for e in entries or [] if isinstance(e, dict)
    ]
    hang = session.scalars(
        select(HostEvent)
        .where(HostEvent.host_id == host.id, HostEvent.kind.in_(("vllm_hung", "vllm_resumed")))
        .order_by(HostEvent.ts.desc(), HostEvent.id.desc())
        .limit(1)
    ).first()
    return {
        "host": host.name,
        "phase": plans[0]["phase"] if plans else None,
        "health": {
            "sample_ts": sample.ts if sample is not None else None,
            "endpoints": health,
            "hung": hang is not None and hang.kind == "vllm_hung",
            "hung_since": hang.data.get("since") if hang and hang.kind == "vllm_hung" else None,
        },
        "plan": plans[0] if plans else None,
        "plans": plans,
    }
