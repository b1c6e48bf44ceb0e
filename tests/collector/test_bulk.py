"""bulk.py: row tuples stored once, duplicates counted exactly, on SQLite and PostgreSQL, in
either of PostgreSQL's ways (a few rows: INSERT; many: COPY, staged on a duplicate)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from collector import bulk, db
from collector.ingest.rows import COLUMN, LINE_COLUMNS, line_row, to_json
from collector.models import Line, Meta, table_of
from collector.schemas import INT64_MAX
from tests.support.postgres import fresh_database


@pytest.mark.parametrize("n", [1, bulk.FEW_ROWS, bulk.FEW_ROWS + 1, 500])
def test_rows_are_stored_once_and_the_count_is_exact(db_url: str, n: int) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    factory = db.make_sessionmaker(engine)
    meta = table_of(Meta)
    rows = [(f"k{i}", f"v{i}") for i in range(n)]
    try:
        with db.session_scope(factory) as session:
            assert db.insert_ignoring_duplicates(session, meta, ("key", "value"), rows) == n
        # half again, half new, in one transaction with a second batch after it
        half = n // 2
        again = rows[half:] + [(f"new{i}", "x") for i in range(half)]
        with db.session_scope(factory) as session:
            assert db.insert_ignoring_duplicates(session, meta, ("key", "value"), again) == half
            more = [(f"more{i}", "y") for i in range(n)]
            assert db.insert_ignoring_duplicates(session, meta, ("key", "value"), more) == n
        # new rows first, then a batch meeting a duplicate, in one transaction: undoing the
        # second must keep the first (on PostgreSQL each COPY leaves its savepoint open)
        fresh = [(f"fresh{i}", "z") for i in range(n)]
        replay = [*rows[:1], *[(f"late{i}", "w") for i in range(n - 1)]]
        with db.session_scope(factory) as session:
            assert db.insert_ignoring_duplicates(session, meta, ("key", "value"), fresh) == n
            assert db.insert_ignoring_duplicates(session, meta, ("key", "value"), replay) == n - 1
        with db.read_scope(factory) as session:
            assert session.scalar(select(func.count()).select_from(Meta)) == 4 * n + half - 1
            assert session.scalar(select(Meta.value).where(Meta.key == "k0")) == "v0"
            keys = set(session.scalars(select(Meta.key)))
            assert {k for k, _ in fresh + replay} <= keys
    finally:
        engine.dispose()


# LINE_COLUMNS as binary COPY sends them (json as text, varchar as text).
LINE_BINARY_TYPES = (
    "int4", "int4", "float8", "int8", "int8", "float8", "text", "int4", "int4", "text",
    "bool", "text", "int2", "float8", "float8", "bool",
)  # fmt: skip


def test_line_rows_read_back_exactly_as_written(factory: sessionmaker[Session]) -> None:
    """Every kind of value a line row holds comes back as it went in, through PostgreSQL's
    binary COPY (and a replay of the batch, staged) as through SQLite's INSERT: floats to the
    last bit, the largest kseq, text with COPY's own control characters, JSON fields."""
    common = (7, 3, 1764400000.123456789)
    rows = [
        line_row(
            common,
            seq=i,
            kseq=INT64_MAX - i,
            ts=0.1 + 0.2 + i,
            source="kmsg" if i % 2 else "journal",
            priority=None if i % 3 == 0 else i % 8,
            facility=0,
            text=f"NVRM: é\t\\N tab\\t {i}\nnext\r\\" + "\u00a0" * (i % 4),
            truncated=i % 5 == 0,
            fields=to_json({"unit": "vllm.service", "n": [i, 1.5]}) if i % 2 else None,
            escaped=i % 7 == 0,
        )
        for i in range(bulk.FEW_ROWS + 10)
    ]
    lines = table_of(Line)
    with db.session_scope(factory) as session:
        assert db.insert_ignoring_duplicates(session, lines, LINE_COLUMNS, rows) == len(rows)
    with db.session_scope(factory) as session:
        assert db.insert_ignoring_duplicates(session, lines, LINE_COLUMNS, rows) == 0
    columns = [lines.c[name] for name in LINE_COLUMNS]
    with db.read_scope(factory) as session:
        stored = session.execute(select(*columns).order_by(lines.c.seq)).all()
    assert [tuple(row) for row in stored] == [_as_read(row) for row in rows]
    if session.bind.dialect.name == "postgresql":  # the binary COPY, not the text fallback
        assert _copy_types("lines", LINE_COLUMNS) == {LINE_BINARY_TYPES}


def test_a_column_without_a_binary_form_here_is_copied_as_text(postgres_url: str) -> None:
    engine = db.make_engine(fresh_database(postgres_url))
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            session.execute(text("CREATE TABLE fw_copy_probe (at timestamptz, n numeric)"))
            rows = [(f"2026-12-02T10:00:0{i}+00:00", f"{i}.25") for i in range(3)]
            db.copy_rows(session, "fw_copy_probe", ("at", "n"), rows)
            stored = session.execute(text("SELECT extract(epoch FROM at), n FROM fw_copy_probe"))
            assert [(float(at), str(n)) for at, n in stored] == [
                (1796205600.0 + i, f"{i}.25") for i in range(3)
            ]
    finally:
        engine.dispose()
    assert _copy_types("fw_copy_probe", ("at", "n")) == {None}


def _as_read(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A written line row as the JSON column gives it back (decoded)."""
    fields = COLUMN["fields"]
    decoded = None if row[fields] is None else json.loads(row[fields])
    return (*row[:fields], decoded, *row[fields + 1 :])


def _copy_types(table: str, columns: tuple[str, ...]) -> set[tuple[str, ...] | None]:
    """What bulk chose for ``table``'s ``columns`` in the databases of this process."""
    return {v for k, v in bulk._binary_types.items() if k[-2:] == (table, columns)}


def test_each_database_gets_the_types_of_its_own_table(postgres_url: str) -> None:
    """Two databases of one process, a table of one name and different column types in each:
    each COPY follows its own database's catalog."""
    stored = []
    for ddl, rows in (
        ("CREATE TABLE fw_copy_twin (a int8, b text)", [(2**40, "x")]),
        ("CREATE TABLE fw_copy_twin (a float8, b bytea)", [(0.5, b"\x00\xff")]),
    ):
        engine = db.make_engine(fresh_database(postgres_url))
        try:
            with db.session_scope(db.make_sessionmaker(engine)) as session:
                session.execute(text(ddl))
                db.copy_rows(session, "fw_copy_twin", ("a", "b"), rows)
                stored += [
                    tuple(row) for row in session.execute(text("SELECT a, b FROM fw_copy_twin"))
                ]
        finally:
            engine.dispose()
    assert stored == [(2**40, "x"), (0.5, b"\x00\xff")]
    assert _copy_types("fw_copy_twin", ("a", "b")) == {("int8", "text"), ("float8", "bytea")}
