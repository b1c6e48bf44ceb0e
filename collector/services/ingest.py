"""Storing one validated batch: one transaction, duplicates ignored by the unique keys."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from collector.models import AgentEvent, Host, Line, Sample
from collector.schemas import Batch, IngestResult, StreamCounts, WireSample
from collector.services.heartbeat import record_heartbeat
from collector.services.hosts import boot_pk as get_boot_pk
from collector.services.telemetry_ingest import TelemetryRegistry, record_telemetry
from collector.timeutil import utcnow


def insert_ignoring_duplicates(
    session: Session, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> int:
    """INSERT ... ON CONFLICT DO NOTHING for many rows; returns how many were stored.

    The hot path of ingest: rows arrive as tuples in ``columns`` order (JSON already encoded)
    and go through the driver's executemany, because SQLAlchemy's per-row parameter
    processing costs more than the database write itself at thousands of rows per batch.
    """
    if not rows:
        return 0
    mark = "%s" if session.get_bind().dialect.name == "postgresql" else "?"
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))}) ON CONFLICT DO NOTHING"
    )
    result = session.connection().exec_driver_sql(sql, rows)
    return max(result.rowcount, 0)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


SAMPLE_COLUMNS = (
    "host_id", "boot_pk", "received_at", "seq", "ts", "burst", "mem_total", "mem_available",
    "mem_free", "swap_used", "psi_mem_some_avg10", "psi_mem_full_avg10", "psi_cpu_some_avg10",
    "psi_io_some_avg10", "psi_io_full_avg10", "load1", "gpu_util", "gpu_mem_used", "gpu_power_w",
    "vllm_running", "vllm_waiting", "vllm_kv_usage", "data",
)  # fmt: skip
LINE_COLUMNS = (
    "host_id", "boot_pk", "received_at", "seq", "kseq", "ts", "source", "priority", "facility",
    "text", "truncated", "fields",
)  # fmt: skip
EVENT_COLUMNS = ("host_id", "boot_pk", "received_at", "seq", "ts", "kind", "data")


def sample_row(sample: WireSample) -> tuple[Any, ...]:
    """The typed columns of SAMPLE_COLUMNS after (host_id, boot_pk, received_at)."""
    mem = sample.mem
    psi = sample.psi or {}
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    gpu = sample.gpu[0] if isinstance(sample.gpu, list) and sample.gpu else sample.gpu
    gpu = gpu if isinstance(gpu, dict) else {}
    vllm = sample.vllm[0] if sample.vllm else {}
    return (
        sample.seq,
        sample.ts,
        sample.burst,
        mem.get("MemTotal"),
        mem.get("MemAvailable"),
        mem.get("MemFree"),
        (swap_total - swap_free) if swap_total is not None and swap_free is not None else None,
        _psi(psi, "memory", "some"),
        _psi(psi, "memory", "full"),
        _psi(psi, "cpu", "some"),
        _psi(psi, "io", "some"),
        _psi(psi, "io", "full"),
        (sample.load or {}).get("1"),
        _num(gpu.get("util")),
        _num(gpu.get("mem_used")),
        _num(gpu.get("power_w")),
        _num(vllm.get("running")),
        _num(vllm.get("waiting")),
        _num(vllm.get("kv_usage")),
        _json(sample.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True)),
    )


def _psi(psi: dict[str, Any], resource: str, kind: str) -> float | None:
    value = (psi.get(resource) or {}).get(kind) or {}
    return _num(value.get("avg10")) if isinstance(value, dict) else None


def _num(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def ingest_batch(
    session: Session,
    *,
    host: Host,
    batch: Batch,
    received_at: float,
    grace_s: float,
    telemetry: TelemetryRegistry | None = None,
) -> IngestResult:
    """Store a batch from ``host`` in the caller's transaction.

    ``telemetry``: the app's per-host parser state; without it, state is rebuilt from storage.
    """
    boot = get_boot_pk(session, host=host, boot_id=batch.boot_id)
    common = (host.id, boot, received_at)

    samples_stored = insert_ignoring_duplicates(
        session, Sample.__table__, SAMPLE_COLUMNS, [common + sample_row(s) for s in batch.samples]
    )
    line_rows = []
    for line in batch.lines:
        text, truncated = line.truncated_text()
        line_rows.append(
            (
                *common,
                line.seq,
                line.kseq,
                line.ts,
                line.source,
                line.priority,
                line.facility,
                text,
                truncated,
                _json(line.fields),
            )
        )
    lines_stored = insert_ignoring_duplicates(session, Line.__table__, LINE_COLUMNS, line_rows)
    events_stored = insert_ignoring_duplicates(
        session,
        AgentEvent.__table__,
        EVENT_COLUMNS,
        [(*common, e.seq, e.ts, e.kind, _json(e.data)) for e in batch.events],
    )
    # Kernel events, vLLM starts/phases, hang verdicts. The returned TelemetryOutcome is where
    # alerting hooks in: .kernel_events (kind in GPU_FAULT_KINDS → kernel.event), .host_events.
    record_telemetry(
        session,
        host_id=host.id,
        boot_pk=boot,
        batch=batch,
        received_at=received_at,
        registry=telemetry,
    )
    record_heartbeat(session, host=host, boot_id=batch.boot_id, now=utcnow(), grace_s=grace_s)
    host.agent_version = batch.agent.version
    host.agent_pid = batch.agent.pid
    host.agent_started_at = batch.agent.started_at
    session.flush()

    stored = StreamCounts(samples=samples_stored, lines=lines_stored, events=events_stored)
    duplicates = StreamCounts(
        samples=len(batch.samples) - stored.samples,
        lines=len(batch.lines) - stored.lines,
        events=len(batch.events) - stored.events,
    )
    resume = {"kseq": resume_kseq(session, boot_pk=boot)}
    return IngestResult(stored=stored, duplicates=duplicates, resume=resume)


def resume_kseq(session: Session, *, boot_pk: int) -> int | None:
    """The highest kernel record the agent has shipped for this boot."""
    return session.scalar(
        select(Line.kseq)
        .where(Line.boot_pk == boot_pk, Line.kseq.is_not(None), Line.source == "kmsg")
        .order_by(Line.kseq.desc())
        .limit(1)
    )
