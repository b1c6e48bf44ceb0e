"""bulk.py: row tuples stored once, duplicates counted exactly, on SQLite and PostgreSQL, in
either of PostgreSQL's ways (a few rows: INSERT; many: COPY, staged on a duplicate)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from collector import bulk, db
from collector.models import Meta, table_of


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
        with db.read_scope(factory) as session:
            assert session.scalar(select(func.count()).select_from(Meta)) == 2 * n + half
            assert session.scalar(select(Meta.value).where(Meta.key == "k0")) == "v0"
    finally:
        engine.dispose()
