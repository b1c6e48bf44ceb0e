"""db.py: a read never waits for SQLite's one writer; pruned space goes back to the disk;
PostgreSQL's pool pings a connection that sat idle."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy.exc
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.models import Host, HostStatus, Meta
from collector.sqlite_tuning import begin_now
from tests.support.postgres import conninfo, fresh_database


def test_a_read_scope_does_not_wait_for_the_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    db.migrate(url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    with db.session_scope(factory) as session:
        session.add(Meta(key="k", value="v"))
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.session_scope(factory) as session:  # BEGIN IMMEDIATE: the write lock
            session.execute(update(Meta).values(value="x"))
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        with db.read_scope(factory) as session:  # would wait out the busy timeout, then fail
            keys = list(session.scalars(select(Meta.key)))
        assert keys == ["k"]  # the committed row, read beside the open write
        assert thread.is_alive()
    finally:
        release.set()
        thread.join(30)
        engine.dispose()


def test_write_now_takes_a_free_write_lock_and_never_waits_for_a_held_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fw.db"
    url = f"sqlite:///{path}"
    db.migrate(url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    try:
        with db.session_scope(factory) as session:
            db.write_now(session)  # free: the transaction holds the lock
            session.add(Meta(key="a", value="1"))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(db.WriteLockBusy), db.session_scope(factory) as session:
                db.write_now(session)  # held: raised at once, not after the 30 s busy timeout
                session.add(Meta(key="b", value="2"))
            assert holder.in_transaction  # still held: nobody waited it out
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        with db.session_scope(factory) as session:  # the pool's connections wait again
            timeouts = session.connection().exec_driver_sql("PRAGMA busy_timeout").scalar()
            session.add(Meta(key="c", value="3"))
        assert timeouts == db.BUSY_TIMEOUT_MS
        with db.read_scope(factory) as session:
            assert sorted(session.scalars(select(Meta.key))) == ["a", "c"]
    finally:
        engine.dispose()


def fill_and_empty(factory: Any) -> None:
    """4 MiB of rows written, then deleted (their pages go to SQLite's free list)."""
    with db.session_scope(factory) as session:
        session.add_all(Meta(key=f"k{i}", value="x" * 4096) for i in range(1024))
    with db.session_scope(factory) as session:
        session.execute(delete(Meta))


def pages(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def test_a_new_sqlite_file_gives_pruned_pages_back_in_steps(tmp_path: Path) -> None:
    path = tmp_path / "fw.db"
    db.migrate(f"sqlite:///{path}")
    engine = db.make_engine(f"sqlite:///{path}")
    factory = db.make_sessionmaker(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2  # incremental
    fill_and_empty(factory)
    full = pages(path)
    db.reclaim_space(factory)
    assert pages(path) < full - 900
    engine.dispose()


def test_an_existing_sqlite_file_is_switched_to_incremental_by_a_full_reclaim(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fw.db"
    with sqlite3.connect(path) as conn:  # a file made before auto_vacuum was set
        conn.execute("CREATE TABLE old_data (x)")
    db.migrate(f"sqlite:///{path}")
    engine = db.make_engine(f"sqlite:///{path}")
    factory = db.make_sessionmaker(engine)
    fill_and_empty(factory)
    full = pages(path)
    db.reclaim_space(factory)  # mode none: pages stay on the free list, reused by new rows
    assert pages(path) == full
    db.reclaim_space(factory, full=True)
    assert pages(path) < full - 900
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2
    engine.dispose()


def kill_backends(url: str) -> None:
    """What a PostgreSQL restart does to the pool: every connection to the database dropped."""
    with psycopg.connect(**conninfo(url), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_an_idle_pooled_postgres_connection_is_pinged_and_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = fresh_database(postgres_url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    with db.read_scope(factory) as session:
        db.ping(session)
    kill_backends(url)
    monkeypatch.setattr(db, "IDLE_PING_S", 0.0)  # every pooled connection counts as idle
    with db.read_scope(factory) as session:
        db.ping(session)  # its ping failed: a fresh connection answers
    engine.dispose()


def test_a_connection_used_just_before_a_restart_fails_one_request_only(
    postgres_url: str,
) -> None:
    url = fresh_database(postgres_url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    with db.read_scope(factory) as session:
        db.ping(session)
    kill_backends(url)  # within IDLE_PING_S of its last use: not pinged
    with pytest.raises(sqlalchemy.exc.OperationalError), db.read_scope(factory) as session:
        db.ping(session)
    with db.read_scope(factory) as session:
        db.ping(session)  # the pool let the broken connection go
    engine.dispose()


def test_a_one_statement_read_leaves_no_autocommit_behind(
    factory: sessionmaker[Session],
) -> None:
    """The due-time reading runs in autocommit on PostgreSQL; the pooled connection it used
    must come back transactional, or the next batch's writes would not roll back."""
    with db.read_scope(factory, one_statement=True) as session:
        driver = session.connection().connection.driver_connection
        assert session.scalar(select(func.count()).select_from(Host)) == 0
        assert getattr(driver, "autocommit", False) == db.is_postgres(session)
    with pytest.raises(RuntimeError), db.session_scope(factory) as session:
        assert session.connection().connection.driver_connection is driver  # the same one
        session.add(Host(name="x", token_hash="x", status=HostStatus.UP))
        session.flush()
        raise RuntimeError("the batch failed after its INSERT")
    with db.read_scope(factory) as session:
        assert session.scalars(select(Host.name)).all() == []


SQLITE_BUSY_RECOVERY = 5 | 1 << 8  # sqlite3's constant from Python 3.11 on


class _Refusing:
    """A pysqlite connection whose BEGIN IMMEDIATE fails with ``message``, and the extended
    error code ``code`` as Python 3.11 reports it (None: as 3.10 reports it, no code)."""

    def __init__(self, message: str, code: int | None) -> None:
        self.message, self.code = message, code
        self.ran: list[str] = []

    def execute(self, sql: str) -> None:
        self.ran.append(sql)
        if sql == "BEGIN IMMEDIATE":
            exc = sqlite3.OperationalError(self.message)
            if self.code is not None:
                exc.sqlite_errorcode = self.code
            raise exc


@pytest.mark.parametrize("code", [SQLITE_BUSY_RECOVERY, None], ids=["extended-code", "py310"])
def test_write_now_takes_every_kind_of_busy_for_a_held_lock(code: int | None) -> None:
    """Another connection's WAL recovery is busy too; on Python 3.10 the message says it."""
    driver = _Refusing("database is locked", code)
    with pytest.raises(db.WriteLockBusy):
        begin_now(driver)  # not an OperationalError: the batch goes to a thread, not a 500
    assert driver.ran[-1] == f"PRAGMA busy_timeout={db.BUSY_TIMEOUT_MS}"


@pytest.mark.parametrize("code", [10, None], ids=["extended-code", "py310"])  # SQLITE_IOERR
def test_write_now_raises_what_is_not_busy(code: int | None) -> None:
    driver = _Refusing("disk I/O error", code)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        begin_now(driver)
    assert driver.ran[-1] == f"PRAGMA busy_timeout={db.BUSY_TIMEOUT_MS}"


def test_after_rollback_runs_on_a_rollback_only(tmp_path: Path) -> None:
    """State kept beside a transaction (the vLLM parser's copy) is undone when the transaction
    is, and only then: a failed commit counts as a rollback."""
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    db.migrate(url)
    factory = db.make_sessionmaker(db.make_engine(url))
    undone: list[str] = []
    with db.session_scope(factory) as session:
        db.after_rollback(session, lambda: undone.append("committed"))
        session.add(Meta(key="k", value="v"))
    with pytest.raises(RuntimeError), db.session_scope(factory) as session:
        db.after_rollback(session, lambda: undone.append("raised"))
        raise RuntimeError("the batch failed")
    with pytest.raises(sqlalchemy.exc.IntegrityError), db.session_scope(factory) as session:
        db.after_rollback(session, lambda: undone.append("commit failed"))
        session.add(Meta(key="k", value="again"))  # the key is taken: the flush at commit fails
    with db.session_scope(factory) as session:
        pass  # a callback of a finished session never runs again
    assert undone == ["raised", "commit failed"]


def test_after_rollback_runs_when_the_rollback_itself_fails() -> None:
    """The connection lost at the commit, and its rollback failing too (constructed session):
    the transaction is gone all the same, so the copy kept beside it must go."""

    class Lost:
        info: dict[str, Any] = {}

        def commit(self) -> None:
            raise OSError("server closed the connection unexpectedly")

        def rollback(self) -> None:
            raise OSError("the connection is closed")

        def close(self) -> None:
            pass

    undone: list[str] = []
    with pytest.raises(OSError, match="is closed"), db.session_scope(Lost) as session:  # type: ignore[arg-type]
        db.after_rollback(session, lambda: undone.append("forgotten"))
    assert undone == ["forgotten"]
