"""A batch's lines into ``lines``, merged with the copies another channel stored first.

A kernel record is one row whichever channel brought it: keyed by (boot, kseq) when the agent
read it from /dev/kmsg, matched by kernel usec and text when it came from the frozen boot's
journal (``journal_copies``). The agent's fields win a merge (full text, its clock, its seq);
the row keeps its first arrival and gains the agent channel. Merges are guarded so an agent
seq already used by another row (state dir lost mid-boot) is not a failure.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from collector import db
from collector.ingest.journal_copies import stored_copies, unkeyed_kernel_usec
from collector.ingest.rows import COLUMN, LINE_COLUMNS, Common, agent_line_rows
from collector.models import CHANNEL_AGENT, Line, table_of
from collector.schemas import Batch

_MERGE_SET = (
    "UPDATE lines SET seq = {m}, ts = {m}, source = {m}, priority = {m}, facility = {m}, "
    "text = {m}, truncated = {m}, fields = {m}, channels = channels | {agent}, "
    "agent_received_at = {m}, escaped = {m} "
)
_SEQ_FREE = (
    "AND seq IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM lines AS other WHERE other.boot_pk = {m} AND other.seq = {m})"
)
_MERGE_BY_KSEQ_SQL = _MERGE_SET + "WHERE boot_pk = {m} AND kseq = {m} " + _SEQ_FREE
_MERGE_BY_ID_SQL = _MERGE_SET + "WHERE id = {m} " + _SEQ_FREE
_AGENT_FIELDS = tuple(
    COLUMN[name]
    for name in (
        "seq", "ts", "source", "priority", "facility", "text", "truncated", "fields",
        "received_at", "escaped",
    )
)  # fmt: skip


def store_lines(session: Session, *, common: Common, batch: Batch) -> int:
    """Insert a batch's lines, merging into the rows another channel stored; returns how many
    the batch added."""
    rows = agent_line_rows(common, batch.lines, batch.escaped_lines)
    # Kernel records without a kseq (the journal's) are matched by usec and text instead.
    usecs = [unkeyed_kernel_usec(line) for line in batch.lines]
    journal = [(usec, row) for usec, row in zip(usecs, rows, strict=True) if usec is not None]
    merged = 0
    if journal:
        rows = [row for usec, row in zip(usecs, rows, strict=True) if usec is None]
        new, merged = place_journal_records(
            session, host_id=common[0], boot_pk=common[1], records=journal
        )
        rows += new
    inserted = db.insert_ignoring_duplicates(session, table_of(Line), LINE_COLUMNS, rows)
    if inserted < len(rows):
        inserted += merge_into_netconsole_lines(session, rows)
    return merged + inserted


def _merge(session: Session, sql: str, updates: list[tuple[Any, ...]]) -> int:
    if not updates:
        return 0
    sql = sql.format(m=db.param_mark(session), agent=CHANNEL_AGENT)
    result = session.connection().exec_driver_sql(sql, updates)
    return max(result.rowcount, 0)


def _agent_fields(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(row[i] for i in _AGENT_FIELDS)


def _seq_key(row: tuple[Any, ...]) -> tuple[Any, Any]:
    return row[COLUMN["boot_pk"]], row[COLUMN["seq"]]


def merge_into_netconsole_lines(session: Session, rows: list[tuple[Any, ...]]) -> int:
    """Mark the agent channel on kernel rows only netconsole had; returns how many.

    Runs only when the plain insert met conflicts, after it: on PostgreSQL the insert waited
    for any concurrent netconsole insert of the same record, so this statement sees it.
    A merged line counts as stored (the agent had not delivered it before); a line whose
    row already knew the agent channel stays a duplicate.
    """
    boot, kseq = COLUMN["boot_pk"], COLUMN["kseq"]
    updates = [
        (*_agent_fields(row), row[boot], row[kseq], *_seq_key(row))
        for row in rows
        if row[kseq] is not None
    ]
    return _merge(session, _MERGE_BY_KSEQ_SQL, updates)


def place_journal_records(
    session: Session, *, host_id: int, boot_pk: int, records: list[tuple[int, tuple[Any, ...]]]
) -> tuple[list[tuple[Any, ...]], int]:
    """Journal records (usec, row) without a kseq: insert the new ones, merge the ones only
    netconsole stored, drop the ones the agent already sent. Returns (rows to insert, merged).
    """
    text, ts = COLUMN["text"], COLUMN["ts"]
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
