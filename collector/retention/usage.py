"""Disk use per host and kind: rows counted, bytes estimated (each table's size on disk shared
out by its rows). Counting walks whole tables, so the retention job measures every
``storage_measure_s`` outside any write lock and keeps the figures in ``meta``; readers take them
from there."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypedDict

from sqlalchemy import Select, Table, case, func, literal_column, select
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.models import (
    AgentEvent,
    Artifact,
    Host,
    HostEvent,
    Incident,
    IncidentSnapshot,
    KernelEventRow,
    Line,
    MatrixRun,
    MatrixStep,
    Meta,
    NetconsoleDatagram,
    Sample,
    SampleTemplate,
    sample_rollups,
    table_of,
)
from collector.retention.policy import host_policy
from collector.retention.prune import urgent_kernel_line
from collector.schemas import OutModel
from collector.settings import Settings

MEASURE_KEY = "storage_usage"
# Every kind shown, in this order: the retention kinds, then what has a retention of its own.
KINDS = (
    "samples", "rollups", "lines", "kernel_lines", "kernel_events", "events", "incidents",
    "matrix_runs", "netconsole",
)  # fmt: skip

# (table, SELECT host_id, kind, count(*)): one table's rows per host and kind.
Query = tuple[str, Select[Any, Any, Any]]
# Parts of a kind's rows (an incident's snapshot and artifacts, a run's steps, the templates
# samples are packed against): their bytes count, their rows do not.
PARTS = ("incident_snapshots", "artifacts", "matrix_steps", "sample_templates")
# {"measured_at": epoch, "tables": {table: bytes}, "rows": {host_id: {kind: {table: rows}}}}
Measurement = dict[str, Any]


class KindUsage(TypedDict):
    kind: str
    rows: int
    bytes: int | None
    retention_days: float | None


class KindUsageOut(OutModel):
    """One kind of a host's records: rows, estimated bytes (None where the engine cannot size
    its tables) and the days it is kept (None: until deleted)."""

    kind: str
    rows: int
    bytes: int | None
    retention_days: float | None


class StorageOut(OutModel):
    """A host's disk use as last measured (``measured_at``, epoch seconds)."""

    measured_at: float | None
    bytes: int | None
    kinds: list[KindUsageOut]


def _per_host(table: Table, host_col: Any, kind: str, joined: Table | None = None) -> Query:
    """(table, rows per host of ``kind``); ``joined``: the parent that names the rows' host."""
    stmt = select(host_col, literal_column(f"'{kind}'"), func.count())
    return table.name, stmt.select_from(table if joined is None else table.join(joined)).group_by(
        host_col
    )


def _queries() -> Iterable[Query]:
    urgent = case((urgent_kernel_line(), "kernel_lines"), else_="lines")
    lines = select(Line.host_id, urgent, func.count()).group_by(Line.host_id, urgent)
    incidents, runs = table_of(Incident), table_of(MatrixRun)
    yield _per_host(table_of(Sample), Sample.host_id, "samples")
    yield _per_host(table_of(SampleTemplate), SampleTemplate.host_id, "samples")
    yield _per_host(sample_rollups, sample_rollups.c.host_id, "rollups")
    yield "lines", lines
    yield _per_host(table_of(KernelEventRow), KernelEventRow.host_id, "kernel_events")
    yield _per_host(table_of(AgentEvent), AgentEvent.host_id, "events")
    yield _per_host(table_of(HostEvent), HostEvent.host_id, "events")
    yield _per_host(incidents, Incident.host_id, "incidents")
    yield _per_host(table_of(IncidentSnapshot), Incident.host_id, "incidents", incidents)
    yield _per_host(table_of(Artifact), Incident.host_id, "incidents", incidents)
    yield _per_host(runs, MatrixRun.host_id, "matrix_runs")
    yield _per_host(table_of(MatrixStep), MatrixRun.host_id, "matrix_runs", runs)
    yield _per_host(table_of(NetconsoleDatagram), NetconsoleDatagram.host_id, "netconsole")


def measure(session: Session, *, now: float) -> Measurement:
    """Count every host's rows per kind and table, and size every table (a read; slow on big
    tables: call it from a read scope)."""
    rows: dict[str, dict[str, dict[str, int]]] = {}
    for table, query in _queries():
        for host_id, kind, n in session.execute(query):
            if host_id is not None:
                rows.setdefault(str(host_id), {}).setdefault(kind, {})[table] = int(n)
    return {"measured_at": now, "tables": db.table_bytes(session), "rows": rows}


def measure_if_due(factory: sessionmaker[Session], *, now: float, settings: Settings) -> bool:
    """Re-measure once the stored figures are ``storage_measure_s`` old; True if it did."""
    with db.read_scope(factory) as session:
        stored = load(session)
        if stored is not None and now - stored["measured_at"] < settings.storage_measure_s:
            return False
        fresh = measure(session, now=now)
    with db.session_scope(factory) as session:
        row = session.get(Meta, MEASURE_KEY) or Meta(key=MEASURE_KEY, value="")
        row.value = json.dumps(fresh, separators=(",", ":"))
        session.add(row)
    return True


def load(session: Session) -> Measurement | None:
    row = session.get(Meta, MEASURE_KEY)
    return json.loads(row.value) if row is not None and row.value else None


def current(session: Session, *, now: float) -> Measurement:
    """The stored figures, or (none stored yet) measured now."""
    return load(session) or measure(session, now=now)


def host_usage(measurement: Measurement, *, host: Host, settings: Settings) -> list[KindUsage]:
    """Rows, estimated bytes and the days kept, per kind, of one host."""
    table_rows: dict[str, int] = {}
    for kinds in measurement["rows"].values():
        for tables in kinds.values():
            for table, n in tables.items():
                table_rows[table] = table_rows.get(table, 0) + n
    sizes: dict[str, int] = measurement["tables"]
    days = host_policy(settings, host.retention) | {
        "matrix_runs": None,
        "netconsole": settings.netconsole_keep_days,
    }
    mine = measurement["rows"].get(str(host.id), {})
    out: list[KindUsage] = []
    for kind in KINDS:
        tables = mine.get(kind, {})
        estimate = [
            n * sizes[t] / table_rows[t] for t, n in tables.items() if t in sizes and table_rows[t]
        ]
        rows = sum(n for t, n in tables.items() if t not in PARTS)
        size = round(sum(estimate)) if sizes else None
        out.append(KindUsage(kind=kind, rows=rows, bytes=size, retention_days=days[kind]))
    return out


def host_storage(session: Session, *, host: Host, settings: Settings, now: float) -> dict[str, Any]:
    """``{"measured_at", "bytes", "kinds": [KindUsage...]}`` of one host (the host API's and the
    host page's ``storage``)."""
    measurement = current(session, now=now)
    kinds = host_usage(measurement, host=host, settings=settings)
    total = sum(k["bytes"] or 0 for k in kinds) if measurement["tables"] else None
    return {"measured_at": measurement["measured_at"], "bytes": total, "kinds": kinds}


def human_bytes(n: float | None) -> str:
    """``1.5 GiB``; ``?`` where the engine could not size its tables."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
