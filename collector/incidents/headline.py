"""What the incident page's headline and the freezes page's cause column answer first: the
kernel events of the window (newest first), the last vLLM start before the loss with its plan,
and an incident's cause (its first kernel event around the silence)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import EVENT_KINDS
from collector.incidents.message import first_kernel_event
from collector.kernel.read import KernelEventOut, list_events
from collector.models import Incident, KernelAction, Severity, VllmPhase, VllmStart
from collector.schemas import OutModel
from collector.vllm.status import VllmStartOut, start_out

HEADLINE_MAX_EVENTS = 100


class IncidentCause(OutModel):
    """An incident's first kernel event from the snapshot window before the silence to its
    end, briefly (the agent's clock): what the freezes page names as the cause."""

    kind: str
    ts: float
    meaning: str | None
    xid: int | None
    nv_err: str | None
    severity: Severity
    action: KernelAction
    line_id: int | None
    text: str | None


def cause(
    session: Session, *, incident: Incident, window_s: float, now: datetime
) -> IncidentCause | None:
    """None when the kernel said nothing worth naming."""
    event = first_kernel_event(session, incident=incident, window_s=window_s, now=now)
    if event is None:
        return None
    line = event.get("line") or {}
    return IncidentCause.model_validate(
        {**event, "line_id": line.get("id"), "text": line.get("text")}
    )


def window_kernel_events(
    session: Session, *, host_id: int, since: float, until: float | None
) -> list[KernelEventOut]:
    """The host's classified kernel events from ``since`` to ``until`` (open-ended while the
    host is silent), newest first, at most ``HEADLINE_MAX_EVENTS``."""
    events = list_events(
        session,
        host_id=host_id,
        kinds=list(EVENT_KINDS),
        since=since,
        until=until,
        limit=HEADLINE_MAX_EVENTS,
    )
    return [e for e in events if isinstance(e, KernelEventOut)]


def vllm_start_before(session: Session, *, host_id: int, ts: float) -> VllmStartOut | None:
    """The host's newest vLLM server start at or before ``ts``, with its plan, or None."""
    start = session.scalars(
        select(VllmStart)
        .where(VllmStart.host_id == host_id, VllmStart.started_ts <= ts)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    ).first()
    if start is None:
        return None
    phases = session.scalars(select(VllmPhase).where(VllmPhase.start_id == start.id))
    return start_out(start, list(phases))
