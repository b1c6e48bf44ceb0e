"""What ingest learns from a stored batch: kernel events, vLLM starts and phases, engine hangs.

Called by ``ingest_batch`` after the raw inserts, in the same transaction. Only kernel lines
(kmsg, netconsole, journal lines of the kernel transport) and ``source="vllm"`` lines are looked
at, and a kernel line costs a few substring tests unless it names an event; the ids of the
stored lines are fetched only for the few lines that say something.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from collector.kernel.classify import KernelEvent, classify_kernel_line
from collector.kernel.vllm_context import WINDOW_S, correlate
from collector.models import HostEvent, KernelEventRow, Line, VllmStart
from collector.schemas import Batch, WireLine, WireSample
from collector.vllm.hang import HangDetector
from collector.vllm.store import (
    StoredLine,
    VllmStream,
    load_stream,
    store_vllm_lines,
)

KERNEL_SOURCES = frozenset({"kmsg", "netconsole"})
# vLLM lines may reach us after the kernel line they explain (another channel, a polled file):
# kernel events up to this long after newly stored vLLM lines are correlated again.
LATE_VLLM_S = 60.0
MAX_RECORRELATE = 1000
COLUMN_SIZES = {"kind": 32, "pci": 32, "process": 255, "nv_err": 64, "call_site": 255}
EVENT_FIELDS = ("kind", "xid", "pci", "pid", "process", "meaning", "nv_err", "call_site")


@dataclass(slots=True)
class NewKernelEvent:
    """A kernel event as stored now (the columns of ``kernel_events``), without an ORM
    instance: an Xid storm stores thousands at once, and alerting only reads them."""

    host_id: int
    boot_pk: int
    line_id: int
    ts: float
    kind: str
    xid: int | None = None
    pci: str | None = None
    pid: int | None = None
    process: str | None = None
    meaning: str | None = None
    nv_err: str | None = None
    call_site: str | None = None
    vllm_phase: str | None = None
    vllm_line_id: int | None = None
    vllm_line_ts: float | None = None
    vllm_line: str | None = None
    id: int | None = None


@dataclass
class HostTelemetry:
    """One host's in-memory state: its vLLM log parser and per-endpoint hang detectors."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stream: VllmStream | None = None
    detectors: dict[str, HangDetector] = field(default_factory=dict)
    last_sample_ts: dict[str, float] = field(default_factory=dict)


class TelemetryRegistry:
    """App-level state of the ingest hooks, keyed by host id (one per collector process)."""

    def __init__(self, hang_stall_s: float = 15.0) -> None:
        self.hang_stall_s = hang_stall_s
        self._lock = threading.Lock()
        self._hosts: dict[int, HostTelemetry] = {}

    def host(self, host_id: int) -> HostTelemetry:
        with self._lock:
            return self._hosts.setdefault(host_id, HostTelemetry())

    def forget(self, host_id: int) -> None:
        """Drop a host's state; it is rebuilt from storage on its next batch."""
        with self._lock:
            self._hosts.pop(host_id, None)


@dataclass
class TelemetryOutcome:
    """What one batch added: kernel events (alerting hooks on these) and host events."""

    kernel_events: list[NewKernelEvent] = field(default_factory=list)
    host_events: list[HostEvent] = field(default_factory=list)


def is_kernel_line(line: WireLine) -> bool:
    if line.source in KERNEL_SOURCES:
        return True
    return line.source == "journal" and (line.fields or {}).get("_TRANSPORT") == "kernel"


def record_telemetry(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    batch: Batch,
    received_at: float,
    registry: TelemetryRegistry | None = None,
) -> TelemetryOutcome:
    """Classify, parse and correlate what ``batch`` stored (duplicates of earlier batches are
    skipped: only lines stored with this ``received_at`` count)."""
    classified: list[tuple[WireLine, KernelEvent]] = []
    vllm_lines: list[WireLine] = []
    for line in batch.lines:
        if line.source == "vllm":
            vllm_lines.append(line)
        elif is_kernel_line(line):
            event = classify_kernel_line(line.text)
            if event is not None:
                classified.append((line, event))
    vllm_samples = [s for s in batch.samples if s.vllm]
    outcome = TelemetryOutcome()
    if not (classified or vllm_lines or vllm_samples):
        return outcome
    registry = registry or TelemetryRegistry()
    state = registry.host(host_id)
    with state.lock:
        try:
            outcome.host_events += _vllm(session, host_id, boot_pk, received_at, vllm_lines, state)
            outcome.kernel_events = new_kernel_events(
                session,
                host_id=host_id,
                boot_pk=boot_pk,
                received_at=received_at,
                classified=classified,
            )
            if vllm_lines:
                stamps = [ln.ts for ln in vllm_lines]
                _recorrelate_after(session, host_id, stamps, outcome.kernel_events)
            outcome.host_events += observe_samples(
                session,
                host_id=host_id,
                samples=vllm_samples,
                state=state,
                stall_s=registry.hang_stall_s,
            )
        except BaseException:
            registry.forget(host_id)  # in-memory parser state may be ahead of the rollback
            raise
    return outcome


def stored_line_ids(
    session: Session, *, boot_pk: int, received_at: float, seqs: Sequence[int]
) -> dict[int, tuple[int, float]]:
    """seq → (id, ts) of the lines of ``seqs`` that this batch stored."""
    if not seqs:
        return {}
    wanted = set(seqs)
    rows = session.execute(
        select(Line.seq, Line.id, Line.ts).where(
            Line.boot_pk == boot_pk,
            Line.seq.between(min(seqs), max(seqs)),
            Line.received_at == received_at,
        )
    )
    return {seq: (line_id, ts) for seq, line_id, ts in rows if seq in wanted}


def new_kernel_events(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    received_at: float,
    classified: Sequence[tuple[WireLine, KernelEvent]],
) -> list[NewKernelEvent]:
    """Store the classified kernel lines of this batch as correlated events; return them.

    The hook for alerting: an event whose ``kind`` is in ``GPU_FAULT_KINDS`` is a GPU fault.
    """
    ids = stored_line_ids(
        session, boot_pk=boot_pk, received_at=received_at, seqs=[ln.seq for ln, _ in classified]
    )
    hits = [
        (stored[0], stored[1], event)
        for line, event in classified
        # None: a duplicate (replay, or the same record over another channel)
        if (stored := ids.get(line.seq)) is not None
    ]
    return store_kernel_events(session, host_id=host_id, boot_pk=boot_pk, hits=hits)


def store_kernel_events(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    hits: Sequence[tuple[int, float, KernelEvent]],
) -> list[NewKernelEvent]:
    """Store (line id, line ts, event) as correlated events; returns the ones stored.

    Every channel calls this for the lines it stored or merged; a line that already has its
    event (the same kernel record brought by the other channel first) is skipped by the unique
    ``line_id``, also against a concurrent writer.
    """
    if not hits:
        return []
    rows = []
    for line_id, ts, event in hits:
        fields = {name: getattr(event, name) for name in EVENT_FIELDS}
        for name, size in COLUMN_SIZES.items():
            if fields[name] is not None:
                fields[name] = fields[name][:size]
        rows.append(
            NewKernelEvent(host_id=host_id, boot_pk=boot_pk, line_id=line_id, ts=ts, **fields)
        )
    correlate(session, host_id=host_id, events=rows)
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    columns = [c.key for c in KernelEventRow.__table__.columns if c.key != "id"]
    # One multi-row statement (an Xid storm is thousands of events); RETURNING names the rows
    # stored, by line id.
    table = KernelEventRow.__table__
    stmt = (
        insert(table)
        .on_conflict_do_nothing(index_elements=["line_id"])
        .returning(table.c.id, table.c.line_id)
    )
    values = [{name: getattr(row, name) for name in columns} for row in rows]
    # Core, not the ORM entity: the ORM's bulk path runs one statement per row here.
    ids = {line_id: pk for pk, line_id in session.connection().execute(stmt, values).all()}
    stored = []
    for row in rows:
        if row.line_id in ids:
            row.id = ids[row.line_id]
            stored.append(row)
    return stored


def _vllm(
    session: Session,
    host_id: int,
    boot_pk: int,
    received_at: float,
    lines: list[WireLine],
    state: HostTelemetry,
) -> list[HostEvent]:
    if not lines:
        return []
    ids = stored_line_ids(
        session, boot_pk=boot_pk, received_at=received_at, seqs=[ln.seq for ln in lines]
    )
    ordered = sorted((ln for ln in lines if ln.seq in ids), key=lambda ln: (ln.ts, ln.seq))
    if not ordered:
        return []
    stream = state.stream
    if stream is None or (
        stream.start_id is not None and session.get(VllmStart, stream.start_id) is None
    ):
        new_ids = {line_id for line_id, _ts in ids.values()}
        stream = state.stream = load_stream(session, host_id=host_id, exclude_ids=new_ids)
    stored = [(ids[ln.seq][0], ln.ts, ln.text) for ln in ordered]
    events = store_vllm_lines(
        session, host_id=host_id, boot_pk=boot_pk, stream=stream, lines=stored
    )
    session.flush()
    return events


def record_vllm_lines(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    stream: VllmStream,
    lines: list[StoredLine],
) -> list[HostEvent]:
    """The vLLM part of the hook for lines stored outside ingest (the matrix runner's server
    output): starts, phases and stats from ``stream``'s parser, then kernel events around
    the lines correlated again. ``lines`` are (id, ts, text) in ts order."""
    if not lines:
        return []
    events = store_vllm_lines(session, host_id=host_id, boot_pk=boot_pk, stream=stream, lines=lines)
    session.flush()
    _recorrelate_after(session, host_id, [ts for _id, ts, _text in lines], ())
    return events


def _recorrelate_after(
    session: Session, host_id: int, stamps: Sequence[float], fresh: Iterable[NewKernelEvent]
) -> None:
    """Kernel events stored before the vLLM lines around them arrived: correlate them again."""
    lo = min(stamps) - WINDOW_S
    hi = max(stamps) + LATE_VLLM_S
    skip = {e.id for e in fresh}
    earlier = [
        e
        for e in session.scalars(
            select(KernelEventRow)
            .where(
                KernelEventRow.host_id == host_id, KernelEventRow.ts >= lo, KernelEventRow.ts <= hi
            )
            .order_by(KernelEventRow.ts)
            .limit(MAX_RECORRELATE)
        )
        if e.id not in skip
    ]
    correlate(session, host_id=host_id, events=earlier)


def observe_samples(
    session: Session,
    *,
    host_id: int,
    samples: Sequence[WireSample],
    state: HostTelemetry,
    stall_s: float = 15.0,
) -> list[HostEvent]:
    """Feed each sample's vLLM metrics to its endpoint's hang detector; store the verdicts."""
    events = []
    for sample in sorted(samples, key=lambda s: s.ts):
        power = _gpu_power(sample)
        for entry in sample.vllm or []:
            running, tokens = entry.get("running"), entry.get("generation_tokens")
            if not (_is_num(running) and _is_num(tokens)):
                continue
            url = str(entry.get("url") or "")
            last = state.last_sample_ts.get(url)
            if last is not None and sample.ts <= last:
                continue  # a replayed sample: the detector has moved past it
            state.last_sample_ts[url] = sample.ts
            detector = state.detectors.setdefault(url, HangDetector(stall_s))
            verdict = detector.observe(sample.ts, int(running), float(tokens), power)
            if verdict is not None:
                data: dict[str, Any] = {**asdict(verdict), "url": url}
                data.pop("kind")
                events.append(
                    HostEvent(host_id=host_id, ts=verdict.ts, kind=verdict.kind, data=data)
                )
    session.add_all(events)
    return events


def _gpu_power(sample: WireSample) -> float | None:
    gpu = sample.gpu[0] if isinstance(sample.gpu, list) and sample.gpu else sample.gpu
    power = gpu.get("power_w") if isinstance(gpu, dict) else None
    return float(power) if _is_num(power) else None


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
