"""The Alembic chain builds exactly the models' schema (no drift) and downgrades cleanly."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

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
    advisory lock; SQLite: a file lock); none dies on the version table."""
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


def flock_waiter(pid: int) -> bool:
    """Whether process ``pid`` waits for an flock (a ``->`` line of /proc/locks)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1:3] == ["->", "FLOCK"] and fields[5] == str(pid):
            return True
    return False


def test_a_second_sqlite_migration_waits_for_the_whole_first_one(tmp_path: Path) -> None:
    """Alembic commits each SQLite migration on its own: a collector that read the version
    between two steps of another ran the next step again and died (seen in CI). The whole
    upgrade holds the lock: a second one waits for it, then finds the database at head."""
    database = tmp_path / "fw.db"
    url = f"sqlite:///{database}"
    with db.sqlite_migration_lock(url):  # as a collector in the middle of its upgrade
        proc = subprocess.Popen(
            [sys.executable, "-m", "collector", "--db", url, "migrate"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while not flock_waiter(proc.pid):
            assert proc.poll() is None, proc.communicate()[0].decode()
            assert time.monotonic() < deadline, "the migration never waited for the lock"
            time.sleep(0.05)
        with sqlite3.connect(database) as conn:  # it has not touched the schema meanwhile
            assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, output
    engine = db.make_engine(url)
    with engine.connect() as conn:
        versions = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    engine.dispose()
    assert versions == [ScriptDirectory.from_config(db.alembic_config(url)).get_current_head()]
