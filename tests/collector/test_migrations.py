"""The Alembic chain builds exactly the models' schema (no drift) and downgrades cleanly."""

from __future__ import annotations

import subprocess
import sys

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from collector import db
from collector.models import Base


def test_migrations_match_models_and_downgrade(db_url: str) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()
    command.downgrade(db.alembic_config(db_url), "0001_base")
    command.upgrade(db.alembic_config(db_url), "head")


def test_collectors_started_at_once_on_an_empty_database_all_come_up(db_url: str) -> None:
    """Each process migrates the same empty database at the same moment (PostgreSQL: under an
    advisory lock; SQLite: BEGIN IMMEDIATE); none dies on the version table."""
    argv = [sys.executable, "-m", "collector", "--db", db_url, "migrate"]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        versions = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    engine.dispose()
    assert versions == [ScriptDirectory.from_config(db.alembic_config(db_url)).get_current_head()]
