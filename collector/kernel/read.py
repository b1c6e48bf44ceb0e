"""Reading a host's events back: kernel events (with their line and vLLM context) and host
events, merged newest first; ``KernelEventOut`` is the one shape of a kernel event (API and
alerts)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.errors import BadRequest
from collector.kernel.classify import EVENT_KINDS, GPU_FAULT_KINDS
from collector.models import HostEvent, KernelEventRow, Line
from collector.schemas import OutModel

MAX_LIMIT = 10_000


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
    ts: float
    kind: str
    gpu_fault: bool
    xid: int | None
    pci: str | None
    pid: int | None
    process: str | None
    meaning: str | None
    nv_err: str | None
    call_site: str | None
    line: EventLine | None
    vllm: VllmContext

    @classmethod
    def of(cls, event: KernelEventRow, line: Line | None) -> KernelEventOut:
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
                "line": line,
                "vllm": {
                    "phase": event.vllm_phase,
                    "line_id": event.vllm_line_id,
                    "line_ts": event.vllm_line_ts,
                    "line": event.vllm_line,
                },
            }
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
    ts: float
    kind: str
    data: dict[str, Any]


EventOut = Annotated[KernelEventOut | HostEventOut, Field(discriminator="type")]


def list_events(
    session: Session,
    *,
    host_id: int,
    kinds: list[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
) -> list[KernelEventOut | HostEventOut]:
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
        out += [KernelEventOut.of(event, line) for event, line in session.execute(query)]
    if host_kinds is None or host_kinds:
        hquery = select(HostEvent).where(HostEvent.host_id == host_id)
        if host_kinds:
            hquery = hquery.where(HostEvent.kind.in_(host_kinds))
        if since is not None:
            hquery = hquery.where(HostEvent.ts >= since)
        if until is not None:
            hquery = hquery.where(HostEvent.ts <= until)
        hquery = hquery.order_by(HostEvent.ts.desc(), HostEvent.id.desc()).limit(limit)
        out += [HostEventOut.model_validate(event) for event in session.scalars(hquery)]
    out.sort(key=lambda e: (e.ts, e.type == "kernel", e.id), reverse=True)
    return out[:limit]
