"""Storing one validated batch: one transaction, duplicates ignored by the unique keys."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from collector.alerts.outbox import enqueue_kernel_events
from collector.db import param_mark
from collector.hosts.registry import boot_pk as get_boot_pk
from collector.ingest.derive import TelemetryRegistry, record_telemetry
from collector.ingest.journal_copies import stored_copies, unkeyed_kernel_usec
from collector.liveness.heartbeat import record_heartbeat, stopping_event
from collector.models import CHANNEL_AGENT, AgentEvent, Host, Line, Sample
from collector.readback.downsample import refresh_rollups
from collector.schemas import Batch, IngestResult, StreamCounts, WireLine, WireSample
from collector.settings import Settings
from collector.timeutil import from_epoch, utcnow


def insert_ignoring_duplicates(
    session: Session, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> int:
    """INSERT ... ON CONFLICT DO NOTHING for many rows; returns how many were stored.

    The hot path of ingest: rows arrive as tuples in ``columns`` order (JSON already encoded)
    and bypass SQLAlchemy's per-row parameter processing, which costs more than the write
    itself at thousands of rows per batch. SQLite takes one prepared executemany; PostgreSQL
    takes a COPY (rows encoded in C by psycopg), see ``_copy_insert``.
    """
    if not rows:
        return 0
    conn = session.connection()
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        return _copy_insert(conn, table.name, names, rows)
    marks = ", ".join("?" * len(columns))
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    return max(conn.exec_driver_sql(sql, rows).rowcount, 0)


def _copy_insert(conn: Any, table: str, names: str, rows: list[tuple[Any, ...]]) -> int:
    """COPY straight into ``table`` under a savepoint; on a unique violation, undo it and
    go through a staging table with INSERT ... SELECT ... ON CONFLICT DO NOTHING.

    Almost every batch is new data (a duplicate is a retry or a replay), and a plain COPY
    costs the server half of the staged path: optimistic first, exact always.
    """
    cursor = conn.connection.driver_connection.cursor()
    with cursor:
        cursor.execute("SAVEPOINT fw_copy")
        try:
            with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT fw_copy")
            cursor.execute("RELEASE SAVEPOINT fw_copy")
            return _staged_insert(cursor, table, names, rows)
        cursor.execute("RELEASE SAVEPOINT fw_copy")
    return len(rows)


def _staged_insert(cursor: Any, table: str, names: str, rows: list[tuple[Any, ...]]) -> int:
    staging = f"staging_{table}"
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    with cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cursor.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING"
    )
    stored = max(cursor.rowcount, 0)
    # Rows of this batch must not meet the next batch of the same transaction.
    cursor.execute(f"DELETE FROM {staging}")
    return stored


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
    "text", "truncated", "fields", "channels", "agent_received_at",
)  # fmt: skip


def line_row(
    common: tuple[int, int, float],
    *,
    seq: int | None,
    kseq: int | None,
    ts: float,
    source: str,
    priority: int | None,
    facility: int | None,
    text: str,
    truncated: bool,
    fields: dict[str, Any] | None,
) -> tuple[Any, ...]:
    """One agent-channel line as a LINE_COLUMNS tuple; ``common`` is (host_id, boot_pk,
    received_at)."""
    return (
        *common,
        *(seq, kseq, ts, source, priority, facility, text, truncated, _json(fields)),
        *(CHANNEL_AGENT, common[2]),
    )


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


def store_lines(session: Session, *, common: tuple[int, int, float], lines: list[WireLine]) -> int:
    """Insert a batch's lines, merging into the rows another channel stored; returns how many
    the batch added (``common`` is (host_id, boot_pk, received_at))."""
    line_rows: list[tuple[Any, ...]] = []
    journal: list[tuple[int, tuple[Any, ...]]] = []  # kernel records without a kseq
    for line in lines:
        text, truncated = line.truncated_text()
        row = line_row(
            common,
            seq=line.seq,
            kseq=line.kseq,
            ts=line.ts,
            source=line.source,
            priority=line.priority,
            facility=line.facility,
            text=text,
            truncated=truncated,
            fields=line.fields,
        )
        usec = unkeyed_kernel_usec(line)
        if usec is None:
            line_rows.append(row)
        else:
            journal.append((usec, row))
    stored = 0
    if journal:
        new, stored = place_journal_records(
            session, host_id=common[0], boot_pk=common[1], records=journal
        )
        line_rows += new
    inserted = insert_ignoring_duplicates(session, Line.__table__, LINE_COLUMNS, line_rows)
    if inserted < len(line_rows):
        inserted += merge_into_netconsole_lines(session, line_rows)
    return stored + inserted


def ingest_batch(
    session: Session,
    *,
    host: Host,
    batch: Batch,
    received_at: float,
    settings: Settings,
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
    if batch.samples:
        stamps = [s.ts for s in batch.samples]
        refresh_rollups(session, host_id=host.id, since=min(stamps), until=max(stamps))
    lines_stored = store_lines(session, common=common, lines=batch.lines)
    events_stored = insert_ignoring_duplicates(
        session,
        AgentEvent.__table__,
        EVENT_COLUMNS,
        [(*common, e.seq, e.ts, e.kind, _json(e.data)) for e in batch.events],
    )
    # Kernel events, vLLM starts/phases, hang verdicts; GPU-fault kernel events also alert.
    outcome = record_telemetry(
        session,
        host_id=host.id,
        boot_pk=boot,
        batch=batch,
        received_at=received_at,
        registry=telemetry,
    )

    now = from_epoch(received_at) or utcnow()  # one clock reading per batch
    record_heartbeat(
        session,
        host=host,
        boot_id=batch.sender_boot_id,
        now=now,
        settings=settings,
        stopping=stopping_event(batch),
    )
    enqueue_kernel_events(
        session,
        host=host,
        events=outcome.kernel_events,
        boot_id=batch.boot_id,
        now=now,
        settings=settings,
    )
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
    # Only a starting agent needs to know where to resume; every other batch skips the query.
    starting = any(e.kind == "agent_started" for e in batch.events)
    resume = {"kseq": resume_kseq(session, boot_pk=boot) if starting else None}
    return IngestResult(stored=stored, duplicates=duplicates, resume=resume)


def resume_kseq(session: Session, *, boot_pk: int) -> int | None:
    """The highest kernel record the agent has shipped for this boot (netconsole's don't count)."""
    return session.scalar(
        select(Line.kseq)
        .where(
            Line.boot_pk == boot_pk,
            Line.kseq.is_not(None),
            Line.channels.op("&")(CHANNEL_AGENT) != 0,
        )
        .order_by(Line.kseq.desc())
        .limit(1)
    )


# Agent copy of a kernel record netconsole brought first: the agent's fields win (full text,
# its clock, its seq), the row keeps its first arrival and gains the agent channel. Guarded
# so an agent seq already used by another row (state dir lost mid-boot) is not a failure.
_MERGE_SET = (
    "UPDATE lines SET seq = {m}, ts = {m}, source = {m}, priority = {m}, facility = {m}, "
    "text = {m}, truncated = {m}, fields = {m}, channels = channels | {agent}, "
    "agent_received_at = {m} "
)
_SEQ_FREE = (
    "AND seq IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM lines AS other WHERE other.boot_pk = {m} AND other.seq = {m})"
)
_MERGE_BY_KSEQ_SQL = _MERGE_SET + "WHERE boot_pk = {m} AND kseq = {m} " + _SEQ_FREE
_MERGE_BY_ID_SQL = _MERGE_SET + "WHERE id = {m} " + _SEQ_FREE
_COLUMN = {name: i for i, name in enumerate(LINE_COLUMNS)}
_AGENT_FIELDS = tuple(
    _COLUMN[name]
    for name in (
        "seq", "ts", "source", "priority", "facility", "text", "truncated", "fields",
        "received_at",
    )
)  # fmt: skip


def _merge(session: Session, sql: str, updates: list[tuple[Any, ...]]) -> int:
    if not updates:
        return 0
    sql = sql.format(m=param_mark(session), agent=CHANNEL_AGENT)
    result = session.connection().exec_driver_sql(sql, updates)
    return max(result.rowcount, 0)


def _agent_fields(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(row[i] for i in _AGENT_FIELDS)


def _seq_key(row: tuple[Any, ...]) -> tuple[Any, Any]:
    return row[_COLUMN["boot_pk"]], row[_COLUMN["seq"]]


def merge_into_netconsole_lines(session: Session, line_rows: list[tuple[Any, ...]]) -> int:
    """Mark the agent channel on kernel rows only netconsole had; returns how many.

    Runs only when the plain insert met conflicts, after it: on PostgreSQL the insert waited
    for any concurrent netconsole insert of the same record, so this statement sees it.
    A merged line counts as stored (the agent had not delivered it before); a line whose
    row already knew the agent channel stays a duplicate.
    """
    boot, kseq = _COLUMN["boot_pk"], _COLUMN["kseq"]
    updates = [
        (*_agent_fields(row), row[boot], row[kseq], *_seq_key(row))
        for row in line_rows
        if row[kseq] is not None
    ]
    return _merge(session, _MERGE_BY_KSEQ_SQL, updates)


def place_journal_records(
    session: Session, *, host_id: int, boot_pk: int, records: list[tuple[int, tuple[Any, ...]]]
) -> tuple[list[tuple[Any, ...]], int]:
    """Journal records (usec, row) without a kseq: insert the new ones, merge the ones only
    netconsole stored, drop the ones the agent already sent. Returns (rows to insert, merged).
    """
    text, ts = _COLUMN["text"], _COLUMN["ts"]
    stamps = [row[ts] for _, row in records]
    copies = stored_copies(
        session,
        host_id=host_id,
        boot_pk=boot_pk,
        records=[(usec, row[text]) for usec, row in records],
        since=min(stamps),
        until=max(stamps),
    )
    new, merges = [], []
    for (_, row), copy in zip(records, copies, strict=True):
        if copy is None:
            new.append(row)
        elif not copy.channels & CHANNEL_AGENT:
            merges.append((*_agent_fields(row), copy.id, *_seq_key(row)))
    return new, _merge(session, _MERGE_BY_ID_SQL, merges)
