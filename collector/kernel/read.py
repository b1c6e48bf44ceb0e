"""Reading a host's events back: kernel events (with their line and vLLM context) and host
events, merged newest first, and kernel occurrences; ``kernel_event_dict`` is the one shape of a
kernel event (API, alerts, timeline)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import EVENT_KINDS, GPU_FAULT_KINDS
from collector.errors import BadRequest
from collector.models import HostEvent, KernelEventRow, KernelOccurrence, Line

MAX_LIMIT = 10_000


def kernel_event_dict(event: KernelEventRow, line: Line | None) -> dict[str, Any]:
    return {
        "type": "kernel",
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
        "line": None
        if line is None
        else {"id": line.id, "source": line.source, "kseq": line.kseq, "text": line.text},
        "vllm": {
            "phase": event.vllm_phase,
            "line_id": event.vllm_line_id,
            "line_ts": event.vllm_line_ts,
            "line": event.vllm_line,
        },
    }


def describe_event(event: dict[str, Any]) -> str:
    """A kernel event (``kernel_event_dict``) in one line for people: kind and code, meaning,
    the action when the event names one, the vLLM phase it fell in."""
    what = " ".join(
        str(part) for part in (event["kind"], event.get("xid"), event.get("nv_err")) if part
    )
    text = f"{what}: {event['meaning']}" if event.get("meaning") else what
    if event.get("action"):
        text += f" (action: {event['action']})"
    phase = (event.get("vllm") or {}).get("phase")
    return f"{text}, during vLLM {phase}" if phase else text


def occurrence_dict(occurrence: KernelOccurrence) -> dict[str, Any]:
    return {
        "id": occurrence.id,
        "kind": occurrence.kind,
        "code": occurrence.code or None,
        "device": occurrence.device or None,
        "count": occurrence.count,
        "first_ts": occurrence.first_ts,
        "last_ts": occurrence.last_ts,
        "severity": occurrence.severity,
        "action": occurrence.action,
        "meaning": occurrence.meaning,
        "boots": occurrence.boots,
    }


def list_occurrences(
    session: Session, *, host_id: int, since: float | None = None, limit: int = 500
) -> list[dict[str, Any]]:
    """The host's kernel occurrences last seen at or after ``since``, most recent first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    query = select(KernelOccurrence).where(
        KernelOccurrence.host_id == host_id, KernelOccurrence.count > 0
    )
    if since is not None:
        query = query.where(KernelOccurrence.last_ts >= since)
    query = query.order_by(KernelOccurrence.last_ts.desc(), KernelOccurrence.id.desc())
    return [occurrence_dict(o) for o in session.scalars(query.limit(limit))]


def host_event_dict(event: HostEvent) -> dict[str, Any]:
    return {"type": "host", "id": event.id, "ts": event.ts, "kind": event.kind, "data": event.data}


def list_events(
    session: Session,
    *,
    host_id: int,
    kinds: list[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
) -> list[dict[str, Any]]:
    """Kernel and host events in [since, until], newest first, at most ``limit``.

    ``kinds`` filters on kind (kernel kinds such as ``nv_err``, host kinds such as
    ``vllm_hung``); the pseudo-kind ``gpu_fault`` stands for every GPU-fault kernel kind.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    wanted = set(kinds or [])
    if "gpu_fault" in wanted:
        wanted = (wanted - {"gpu_fault"}) | GPU_FAULT_KINDS
    kernel_kinds = wanted & set(EVENT_KINDS) if wanted else None
    host_kinds = wanted - set(EVENT_KINDS) if wanted else None

    out: list[dict[str, Any]] = []
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
        out += [kernel_event_dict(event, line) for event, line in session.execute(query)]
    if host_kinds is None or host_kinds:
        hquery = select(HostEvent).where(HostEvent.host_id == host_id)
        if host_kinds:
            hquery = hquery.where(HostEvent.kind.in_(host_kinds))
        if since is not None:
            hquery = hquery.where(HostEvent.ts >= since)
        if until is not None:
            hquery = hquery.where(HostEvent.ts <= until)
        hquery = hquery.order_by(HostEvent.ts.desc(), HostEvent.id.desc()).limit(limit)
        out += [host_event_dict(event) for event in session.scalars(hquery)]
    out.sort(key=lambda e: (e["ts"], e["type"] == "kernel", e["id"]), reverse=True)
    return out[:limit]
