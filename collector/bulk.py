"""Bulk writes of plain row tuples, the hot path of ingest (dialect code, as ``db``'s).

Rows arrive as tuples in column order, JSON already encoded, and go to the driver's cursor:
per row, SQLAlchemy's parameter processing cost more than the write itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from sqlalchemy import Table
from sqlalchemy.orm import Session

# Up to this many rows, PostgreSQL takes an INSERT (pipelined) rather than a COPY.
FEW_ROWS = 64

# Column types (pg_type.typname) COPY takes in binary, as the type psycopg encodes the value
# as: the receive function is the column's own, so a varchar keeps its length check and json
# its syntax check (json's binary form is its text).
_BINARY_AS = {
    "int2": "int2", "int4": "int4", "int8": "int8", "float4": "float4", "float8": "float8",
    "bool": "bool", "bytea": "bytea", "text": "text", "varchar": "text", "json": "text",
}  # fmt: skip
_COLUMN_TYPES = (
    "SELECT a.attname, t.typname FROM pg_attribute AS a JOIN pg_type AS t ON t.oid = a.atttypid "
    "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped"
)
# (server, database, table, columns) -> the binary COPY types, or None where one column has no
# binary form here.
_binary_types: dict[tuple[Any, ...], tuple[str, ...] | None] = {}


def copy_rows(
    session: Session, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Append plain tuples in ``columns`` order: one COPY on PostgreSQL (rows encoded in C by
    psycopg), one prepared executemany on SQLite; no per-row SQLAlchemy work."""
    if not rows:
        return
    conn = session.connection()
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        with conn.connection.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
            _copy(cursor, table, columns, rows)
        return
    marks = ", ".join("?" * len(columns))
    conn.exec_driver_sql(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(rows))


def insert_ignoring_duplicates(
    session: Session, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> int:
    """INSERT ... ON CONFLICT DO NOTHING for many rows; returns how many were stored.

    The hot path of ingest: rows arrive as tuples in ``columns`` order (JSON already encoded)
    and go to the driver's cursor, past SQLAlchemy's per-row parameter processing, which costs
    more than the write itself at thousands of rows per batch. SQLite takes one prepared
    executemany. PostgreSQL takes a COPY (``_copy_insert``), or for a few rows (a heartbeat's
    lines) one pipelined executemany: one round trip where the COPY under its savepoint
    takes three.
    """
    if not rows:
        return 0
    conn = session.connection()
    names = ", ".join(columns)
    postgres = conn.dialect.name == "postgresql"
    if postgres and len(rows) > FEW_ROWS:
        return _copy_insert(conn, table.name, columns, rows)
    marks = ", ".join(("%s" if postgres else "?") for _ in columns)
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(sql, rows)
        return max(int(cursor.rowcount), 0)
    finally:
        cursor.close()


def _copy_insert(conn: Any, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> int:
    """COPY straight into ``table`` under a savepoint; on a unique violation, undo it and
    go through a staging table with INSERT ... SELECT ... ON CONFLICT DO NOTHING.

    Almost every batch is new data (a duplicate is a retry or a replay), and a plain COPY
    costs the server half of the staged path: optimistic first, exact always.
    A savepoint that was not needed stays open until the transaction ends (its commit keeps
    what it holds): releasing it cost one more round trip, 7 % of a store thread's wait on the
    server under ``bench/ingest.py``'s load, within 1 % of one client's batch latency
    (``bench/batch_latency.py``). A rollback returns to the newest savepoint of the name,
    this COPY's, so what earlier COPYs of the transaction stored stays.
    """
    cursor = conn.connection.driver_connection.cursor()
    with cursor:
        cursor.execute("SAVEPOINT fw_copy")
        try:
            _copy(cursor, table, columns, rows)
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT fw_copy")
            return _staged_insert(cursor, table, columns, rows)
    return len(rows)


def _staged_insert(
    cursor: psycopg.Cursor[Any], table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> int:
    staging = f"staging_{table}"
    names = ", ".join(columns)
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    _copy(cursor, staging, columns, rows, types_of=table)
    cursor.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING"
    )
    stored = max(cursor.rowcount, 0)
    # Rows of this batch must not meet the next batch of the same transaction.
    cursor.execute(f"DELETE FROM {staging}")
    return stored


def _copy(
    cursor: psycopg.Cursor[Any],
    table: str,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    types_of: str | None = None,
) -> None:
    """One COPY of ``rows`` into ``table``, encoded by psycopg in C; in binary where every
    column allows it (``types_of``: the table whose column types ``table`` has).

    Binary, because the text form of a float costs more to write than the rest of a line's
    row together (its shortest repr), and PostgreSQL then parses it back.
    """
    types = _copy_types(cursor, types_of or table, columns)
    binary = " (FORMAT BINARY)" if types is not None else ""
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN{binary}") as copy:
        if types is not None:
            copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def _copy_types(
    cursor: psycopg.Cursor[Any], table: str, columns: Sequence[str]
) -> tuple[str, ...] | None:
    """The binary COPY types of ``columns``, read from the catalog once a process and
    database (tables change only by a migration, before serving)."""
    info = cursor.connection.info
    key = (info.host, info.port, info.dbname, table, tuple(columns))
    if key not in _binary_types:
        cursor.execute(_COLUMN_TYPES, (table,))
        found: dict[str, str] = dict(cursor.fetchall())
        types = tuple(_BINARY_AS.get(found.get(name, ""), "") for name in columns)
        _binary_types[key] = None if "" in types else types
    return _binary_types[key]
