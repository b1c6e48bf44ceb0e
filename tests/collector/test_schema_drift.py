"""The migrated schema is exactly the models: no drift on SQLite or PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from collector import db
from collector.models import Base


def test_migrations_match_models(db_url: str) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_telemetry_tables_exist_at_head(sqlite_url: str) -> None:
    db.migrate(sqlite_url)
    engine = db.make_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            tables = set(conn.dialect.get_table_names(conn))
    finally:
        engine.dispose()
    assert {"kernel_events", "vllm_starts", "vllm_phases", "host_events"} <= tables
