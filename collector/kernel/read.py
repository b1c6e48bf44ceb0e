"""Reading a host's events back: kernel events (with their line and vLLM context) and host
events, merged newest first, and kernel occurrences; ``KernelEventOut`` is the one shape of a
kernel event (API, alerts), ``OccurrenceOut`` of an occurrence. Host views move event times to
the collector's time base (``offset``, ``collector.readback.timebase``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import EVENT_KINDS, GPU_FAULT_KINDS
from collector.models import (
    HostEvent,
    KernelAction,
    KernelEventRow,
    KernelOccurrence,
    Line,
    Severity,
)
from collector.readback.series import check_limit
from collector.readback.timebase import to_agent
from collector.schemas import AgentTime, OutModel, on_collector_clock


class EventLine(OutModel):
    """The kernel line an event was classified from."""

    id: int
    source: str
    kseq: int | None
    text: str


class VllmContext(OutModel):
    """What vLLM was doing when the event happened: its phase and its nearest log line."""

    phase: str | None
    line_id: int | None
    line_ts: float | None
    line: str | None


class KernelEventOut(OutModel):
    type: Literal["kernel"] = "kernel"
    id: int
    ts: AgentTime
    kind: str
    gpu_fault: bool
    xid: int | None
    pci: str | None
    pid: int | None
    process: str | None
    meaning: str | None
    nv_err: str | None
    call_site: str | None
    code: str | None
    device: str | None
    module: str | None
    severity: Severity
    action: KernelAction
    occurrence_id: int | None
    line: EventLine | None
    vllm: VllmContext

    @classmethod
    def of(cls, event: KernelEventRow, line: Line | None, offset: float = 0.0) -> KernelEventOut:
        return cls.model_validate(
            {
                "id": event.id,
                "ts": event.ts,
                "kind": event.kind,
                "gpu_fault": event.kind in GPU_FAULT_KINDS,
                "xid": event.xid,
                "pci": event.pci,
                "pid": event.pid,
                "process": event.process,
                "meaning": event.meaning,
                "nv_err": event.nv_err,
                "call_site": event.call_site,
                "code": event.code,
                "device": event.device,
                "module": event.module,
                "severity": event.severity,
                "action": event.action,
                "occurrence_id": event.occurrence_id,
                "line": line,
                "vllm": {
                    "phase": event.vllm_phase,
                    "line_id": event.vllm_line_id,
                    "line_ts": event.vllm_line_ts,
                    "line": event.vllm_line,
                },
            },
            context=on_collector_clock(offset),
        )


def describe_event(event: dict[str, Any]) -> str:
    """A kernel event (``KernelEventOut`` as data) in one line for people: kind and code,
    meaning, the action when the event names one, the vLLM phase it fell in."""
    what = " ".join(
        str(part) for part in (event["kind"], event.get("xid"), event.get("nv_err")) if part
    )
    text = f"{what}: {event['meaning']}" if event.get("meaning") else what
    if event.get("action"):
        text += f" (action: {event['action']})"
    phase = (event.get("vllm") or {}).get("phase")
    return f"{text}, during vLLM {phase}" if phase else text


class HostEventOut(OutModel):
    """A collector-side fact about a host (``vllm_hung``, ``vllm_stats``, ...)."""

    type: Literal["host"] = "host"
    id: int
    ts: AgentTime
    kind: str
    data: dict[str, Any]


EventOut = Annotated[KernelEventOut | HostEventOut, Field(discriminator="type")]


def _none_if_empty(value: str | None) -> str | None:
    return value or None


# ``code`` and ``device`` are stored as '' where a fault has none (they are part of the key).
NoneIfEmpty = Annotated[str | None, BeforeValidator(_none_if_empty)]


class OccurrenceOut(OutModel):
    """A kernel fault folded by (kind, code, device): how often, first and last seen (the
    agent's clock), in how many boots, its severity and action."""

    id: int
    kind: str
    code: NoneIfEmpty
    device: NoneIfEmpty
    count: int
    first_ts: float
    last_ts: float
    severity: Severity
    action: KernelAction
    meaning: str | None
    boots: int


def list_occurrences(
    session: Session, *, host_id: int, since: float | None = None, limit: int = 500
) -> list[OccurrenceOut]:
    """The host's kernel occurrences last seen at or after ``since``, most recent first."""
    check_limit(limit)
    query = select(KernelOccurrence).where(
        KernelOccurrence.host_id == host_id, KernelOccurrence.count > 0
    )
    if since is not None:
        query = query.where(KernelOccurrence.last_ts >= since)
    query = query.order_by(KernelOccurrence.last_ts.desc(), KernelOccurrence.id.desc())
    return [OccurrenceOut.model_validate(o) for o in session.scalars(query.limit(limit))]


def list_events(
    session: Session,
    *,
    host_id: int,
    kinds: list[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
    offset: float = 0.0,
) -> list[KernelEventOut | HostEventOut]:
    """Kernel and host events in [since, until], newest first, at most ``limit``; [since,
    until] and the times returned are on the collector's time base (``offset``: the host's
    clock offset).

    ``kinds`` filters on kind (kernel kinds such as ``nv_err``, host kinds such as
    ``vllm_hung``); the pseudo-kind ``gpu_fault`` stands for every GPU-fault kernel kind.
    """
    check_limit(limit)
    wanted = set(kinds or [])
    if "gpu_fault" in wanted:
        wanted = (wanted - {"gpu_fault"}) | GPU_FAULT_KINDS
    kernel_kinds = wanted & set(EVENT_KINDS) if wanted else None
    host_kinds = wanted - set(EVENT_KINDS) if wanted else None
    since, until = to_agent(since, offset), to_agent(until, offset)

    out: list[KernelEventOut | HostEventOut] = []
    if kernel_kinds is None or kernel_kinds:
        query = (
            select(KernelEventRow, Line)
            .outerjoin(Line, Line.id == KernelEventRow.line_id)
            .where(KernelEventRow.host_id == host_id)
        )
        if kernel_kinds:
            query = query.where(KernelEventRow.kind.in_(kernel_kinds))
        if since is not None:
            query = query.where(KernelEventRow.ts >= since)
        if until is not None:
            query = query.where(KernelEventRow.ts <= until)
        query = query.order_by(KernelEventRow.ts.desc(), KernelEventRow.id.desc()).limit(limit)
        out += [KernelEventOut.of(event, line, offset) for event, line in session.execute(query)]
    if host_kinds is None or host_kinds:
        hquery = select(HostEvent).where(HostEvent.host_id == host_id)
        if host_kinds:
            hquery = hquery.where(HostEvent.kind.in_(host_kinds))
        if since is not None:
            hquery = hquery.where(HostEvent.ts >= since)
        if until is not None:
            hquery = hquery.where(HostEvent.ts <= until)
        hquery = hquery.order_by(HostEvent.ts.desc(), HostEvent.id.desc()).limit(limit)
        clock = on_collector_clock(offset)
        out += [HostEventOut.model_validate(e, context=clock) for e in session.scalars(hquery)]
    out.sort(key=lambda e: (e.ts, e.type == "kernel", e.id), reverse=True)
    return out[:limit]
