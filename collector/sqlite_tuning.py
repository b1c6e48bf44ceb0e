"""SQLite's connection settings and its BEGINs: WAL, the busy timeout, the write lock taken up
front, a reader's deferred BEGIN (``collector.db.read_scope``) and a writer that must not wait
(``write_now``)."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from collector.sqlite_codes import SQLITE_BUSY, primary_code

READ_ONLY = "freezewatch_read_only"  # connection execution option: see db.read_scope
NO_WAIT = "freezewatch_no_wait"  # connection execution option: see write_now
BUSY_TIMEOUT_MS = 30_000


def tune_sqlite(engine: Engine) -> None:
    """WAL + busy timeout, and take over BEGIN so transactions (and test rollbacks) are real.

    BEGIN IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
    writes fails at once with "database is locked" when another writer got there first, because
    SQLite cannot wait on a lock upgrade. SQLite has one writer anyway.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite: let SQLAlchemy emit BEGIN itself
        cur = dbapi_conn.cursor()
        # Pruned pages go back to the disk (reclaim_space). Set on a new file only (before WAL
        # writes the header; it takes the write lock); others wait for a full reclaim_space.
        if cur.execute("PRAGMA page_count").fetchone()[0] == 0:
            cur.execute("PRAGMA auto_vacuum=INCREMENTAL")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        options = conn.get_execution_options()
        driver = conn.connection.driver_connection  # direct: cheaper than exec_driver_sql
        if options.get(READ_ONLY):
            driver.execute("BEGIN")
        elif not options.get(NO_WAIT):
            driver.execute("BEGIN IMMEDIATE")
        else:
            begin_now(driver)


def begin_now(driver: Any) -> None:
    """BEGIN IMMEDIATE on the pysqlite connection ``driver`` without waiting: ``WriteLockBusy``
    on any SQLITE_BUSY (Python reports the extended code: BUSY_RECOVERY, BUSY_SNAPSHOT...)."""
    driver.execute("PRAGMA busy_timeout=0")
    try:
        driver.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if not is_busy(exc):
            raise
        raise WriteLockBusy() from None
    finally:
        driver.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is an SQLITE_BUSY of any kind (WAL recovery's included)."""
    return primary_code(exc) == SQLITE_BUSY


class WriteLockBusy(Exception):
    """Another connection holds SQLite's write lock at this instant (``write_now``)."""


def write_now(session: Session) -> None:
    """Begin ``session``'s transaction holding SQLite's write lock, if no other connection
    holds it this instant; ``WriteLockBusy`` at once otherwise, never a wait. For a store run on
    the event loop, which must never block on the lock: once it holds it, nothing in a SQLite
    transaction waits on another connection (in WAL mode readers never block the writer)."""
    session.connection(execution_options={NO_WAIT: True})
