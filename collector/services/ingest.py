"""Storing one validated batch: one transaction, duplicates ignored by the unique keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from collector.models import AgentEvent, Host, Line, Sample
from collector.schemas import Batch, IngestResult, StreamCounts, WireSample
from collector.services.alerts import enqueue_kernel_events
from collector.services.heartbeat import record_heartbeat, stopping_event
from collector.services.hosts import boot_pk as get_boot_pk
from collector.settings import Settings
from collector.timeutil import from_epoch, utcnow


def insert_ignoring_duplicates(
    session: Session, table: Table, rows: Sequence[dict[str, Any]]
) -> list[Any]:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING id; returns the ids of the rows stored."""
    if not rows:
        return []
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(table).on_conflict_do_nothing().returning(table.c.id)
    return list(session.scalars(stmt, rows))


def sample_row(sample: WireSample) -> dict[str, Any]:
    mem = sample.mem
    psi = sample.psi or {}
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    gpu = sample.gpu[0] if isinstance(sample.gpu, list) and sample.gpu else sample.gpu
    gpu = gpu if isinstance(gpu, dict) else {}
    vllm = sample.vllm[0] if sample.vllm else {}
    return {
        "seq": sample.seq,
        "ts": sample.ts,
        "burst": sample.burst,
        "mem_total": mem.get("MemTotal"),
        "mem_available": mem.get("MemAvailable"),
        "mem_free": mem.get("MemFree"),
        "swap_used": (swap_total - swap_free)
        if swap_total is not None and swap_free is not None
        else None,
        "psi_mem_some_avg10": _psi(psi, "memory", "some"),
        "psi_mem_full_avg10": _psi(psi, "memory", "full"),
        "psi_cpu_some_avg10": _psi(psi, "cpu", "some"),
        "psi_io_some_avg10": _psi(psi, "io", "some"),
        "psi_io_full_avg10": _psi(psi, "io", "full"),
        "load1": (sample.load or {}).get("1"),
        "gpu_util": _num(gpu.get("util")),
        "gpu_mem_used": _num(gpu.get("mem_used")),
        "gpu_power_w": _num(gpu.get("power_w")),
        "vllm_running": _num(vllm.get("running")),
        "vllm_waiting": _num(vllm.get("waiting")),
        "vllm_kv_usage": _num(vllm.get("kv_usage")),
        "data": sample.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True),
    }


def _psi(psi: dict[str, Any], resource: str, kind: str) -> float | None:
    value = (psi.get(resource) or {}).get(kind) or {}
    return _num(value.get("avg10")) if isinstance(value, dict) else None


def _num(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def ingest_batch(
    session: Session, *, host: Host, batch: Batch, received_at: float, settings: Settings
) -> tuple[IngestResult, list[int]]:
    """Store a batch from ``host``; returns the result and the ids of newly stored lines."""
    boot = get_boot_pk(session, host=host, boot_id=batch.boot_id)
    common = {"host_id": host.id, "boot_pk": boot, "received_at": received_at}

    sample_ids = insert_ignoring_duplicates(
        session, Sample.__table__, [{**common, **sample_row(s)} for s in batch.samples]
    )
    line_rows = []
    for line in batch.lines:
        text, truncated = line.truncated_text()
        line_rows.append(
            {
                **common,
                "seq": line.seq,
                "kseq": line.kseq,
                "ts": line.ts,
                "source": line.source,
                "priority": line.priority,
                "facility": line.facility,
                "text": text,
                "truncated": truncated,
                "fields": line.fields,
            }
        )
    line_ids = insert_ignoring_duplicates(session, Line.__table__, line_rows)
    event_ids = insert_ignoring_duplicates(
        session,
        AgentEvent.__table__,
        [
            {**common, "seq": e.seq, "ts": e.ts, "kind": e.kind, "data": e.data}
            for e in batch.events
        ],
    )

    now = from_epoch(received_at) or utcnow()  # one clock reading per batch
    record_heartbeat(
        session,
        host=host,
        boot_id=batch.boot_id,
        now=now,
        settings=settings,
        stopping=stopping_event(batch),
    )
    enqueue_kernel_events(
        session, host=host, line_ids=line_ids, boot_id=batch.boot_id, now=now, settings=settings
    )
    host.agent_version = batch.agent.version
    host.agent_pid = batch.agent.pid
    host.agent_started_at = batch.agent.started_at
    session.flush()

    stored = StreamCounts(samples=len(sample_ids), lines=len(line_ids), events=len(event_ids))
    duplicates = StreamCounts(
        samples=len(batch.samples) - stored.samples,
        lines=len(batch.lines) - stored.lines,
        events=len(batch.events) - stored.events,
    )
    resume = {"kseq": resume_kseq(session, boot_pk=boot)}
    return IngestResult(stored=stored, duplicates=duplicates, resume=resume), line_ids


def resume_kseq(session: Session, *, boot_pk: int) -> int | None:
    """The highest kernel record the agent has shipped for this boot."""
    return session.scalar(
        select(Line.kseq)
        .where(Line.boot_pk == boot_pk, Line.kseq.is_not(None), Line.source == "kmsg")
        .order_by(Line.kseq.desc())
        .limit(1)
    )
