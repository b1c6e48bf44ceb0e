"""Engine, sessions, migrations and every statement that differs between SQLite and PostgreSQL.

The rest of the collector writes dialect-neutral SQLAlchemy; where the two engines need
different SQL (bulk loads, upserts, row locks, time bucketing) it calls a helper from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy import CursorResult, Engine, Executable, Float, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.expression import FunctionElement

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
AFTER_COMMIT = "after_commit"
READ_ONLY = "freezewatch_read_only"  # connection execution option: see read_scope
MIGRATION_LOCK = 0x66776D67  # "fwmg": collectors started at once on PostgreSQL take turns


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and route them through psycopg 3."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        _tune_sqlite(engine)
        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _tune_sqlite(engine: Engine) -> None:
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
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        begin = "BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE"
        conn.connection.driver_connection.execute(begin)  # direct: cheaper than exec_driver_sql


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """The one commit point of a request or a background job: commit on success, roll back on
    error; then run what ``after_commit`` queued (work that must see the committed rows)."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        callbacks = session.info.pop(AFTER_COMMIT, [])
        session.close()
    for callback in callbacks:
        callback()


@contextmanager
def read_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work that only reads, ended by a rollback. On SQLite its BEGIN is deferred: in
    WAL mode readers never wait for the one writer (``session_scope`` takes the write lock up
    front, see ``_tune_sqlite``)."""
    session = factory()
    try:
        session.connection(execution_options={READ_ONLY: True})
        yield session
    finally:
        session.rollback()
        session.close()


def after_commit(session: Session, callback: Callable[[], object]) -> None:
    """Run ``callback`` once the session's transaction has committed (never on rollback)."""
    session.info.setdefault(AFTER_COMMIT, []).append(callback)


def ping(session: Session) -> None:
    """A round trip to the database (liveness)."""
    session.execute(text("SELECT 1"))


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def param_mark(session: Session) -> str:
    """The DB-API placeholder of the session's driver, for raw ``exec_driver_sql`` statements."""
    return "%s" if is_postgres(session) else "?"


def insert(session: Session, table: Any) -> Any:
    """The dialect's INSERT construct, which knows ``on_conflict_do_nothing/_update``."""
    return (postgresql.insert if is_postgres(session) else sqlite.insert)(table)


def lock_for_update(session: Session, row: Any) -> None:
    """Re-read ``row`` under a row lock. SQLite needs none: its transactions here begin
    IMMEDIATE, holding the database's one write lock."""
    if is_postgres(session):
        session.refresh(row, with_for_update=True)


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
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        with cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    marks = ", ".join("?" * len(columns))
    conn.exec_driver_sql(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(rows))


def insert_ignoring_duplicates(
    session: Session, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> int:
    """INSERT ... ON CONFLICT DO NOTHING for many rows; returns how many were stored.

    The hot path of ingest: rows arrive as tuples in ``columns`` order (JSON already encoded)
    and bypass SQLAlchemy's per-row parameter processing, which costs more than the write
    itself at thousands of rows per batch. SQLite takes one prepared executemany; PostgreSQL
    takes a COPY, see ``_copy_insert``.
    """
    if not rows:
        return 0
    conn = session.connection()
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        return _copy_insert(conn, table.name, names, rows)
    marks = ", ".join("?" * len(columns))
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    return max(conn.exec_driver_sql(sql, rows).rowcount, 0)


def _copy_insert(conn: Any, table: str, names: str, rows: list[tuple[Any, ...]]) -> int:
    """COPY straight into ``table`` under a savepoint; on a unique violation, undo it and
    go through a staging table with INSERT ... SELECT ... ON CONFLICT DO NOTHING.

    Almost every batch is new data (a duplicate is a retry or a replay), and a plain COPY
    costs the server half of the staged path: optimistic first, exact always.
    """
    cursor = conn.connection.driver_connection.cursor()
    with cursor:
        cursor.execute("SAVEPOINT fw_copy")
        try:
            with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT fw_copy")
            cursor.execute("RELEASE SAVEPOINT fw_copy")
            return _staged_insert(cursor, table, names, rows)
        cursor.execute("RELEASE SAVEPOINT fw_copy")
    return len(rows)


def _staged_insert(
    cursor: psycopg.Cursor[Any], table: str, names: str, rows: list[tuple[Any, ...]]
) -> int:
    staging = f"staging_{table}"
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    with cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cursor.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING"
    )
    stored = max(cursor.rowcount, 0)
    # Rows of this batch must not meet the next batch of the same transaction.
    cursor.execute(f"DELETE FROM {staging}")
    return stored


class epoch_bucket(FunctionElement[float]):
    """``floor(ts / step) * step``: SQLite has no floor() unless compiled with math functions;
    for the non-negative epoch seconds stored here an integer cast truncates to the same value."""

    type = Float()
    inherit_cache = True
    name = "epoch_bucket"


@compiles(epoch_bucket)
def _bucket_default(element: epoch_bucket, compiler: Any, **kw: Any) -> str:
    ts, step = list(element.clauses)
    return (
        f"(CAST(({compiler.process(ts, **kw)}) / ({compiler.process(step, **kw)}) AS INTEGER)"
        f" * ({compiler.process(step, **kw)}))"
    )


@compiles(epoch_bucket, "postgresql")
def _bucket_postgres(element: epoch_bucket, compiler: Any, **kw: Any) -> str:
    ts, step = list(element.clauses)
    return (
        f"(floor(({compiler.process(ts, **kw)}) / ({compiler.process(step, **kw)}))"
        f" * ({compiler.process(step, **kw)}))"
    )


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def migrate(url: str) -> None:
    """Bring the schema to head (idempotent; `serve` calls it before accepting traffic). On
    PostgreSQL under an advisory lock; on SQLite the migration's BEGIN IMMEDIATE serializes."""
    cfg = alembic_config(url)
    if make_url(normalize_url(url)).get_backend_name() != "postgresql":
        command.upgrade(cfg, "head")
        return
    engine = create_engine(normalize_url(url), poolclass=NullPool)
    with engine.connect() as conn:  # not pooled: closing it releases the lock, error or not
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
        conn.commit()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()
    engine.dispose()


def table_bytes(session: Session) -> dict[str, int]:
    """Bytes on disk per table, indexes included; {} on an SQLite built without dbstat."""
    sql = (
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = current_schema()"
        if is_postgres(session)
        else "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat AS d JOIN sqlite_master AS m"
        " ON m.name = d.name WHERE d.aggregate = 1 GROUP BY m.tbl_name"
    )
    try:
        return {str(name): int(size or 0) for name, size in session.execute(text(sql)).all()}
    except OperationalError:
        return {}


def reclaim_space(
    factory: sessionmaker[Session], *, tables: Sequence[str] = (), full: bool = False
) -> None:
    """Give back what pruning freed. PostgreSQL: a plain VACUUM of ``tables`` (all: none named),
    which blocks no writer, so new rows reuse the dead rows' space. SQLite with auto_vacuum
    INCREMENTAL: ``incremental_vacuum`` in steps of 2048 pages, each a short write lock; ``full``
    switches any file to INCREMENTAL and rewrites it (VACUUM: needs the file's size free on disk
    and holds the write lock throughout)."""
    engine = factory.kw["bind"]
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f"VACUUM (ANALYZE) {', '.join(tables)}".strip())
        return
    raw = engine.raw_connection()
    try:
        lite = raw.driver_connection
        if full:
            lite.executescript("PRAGMA auto_vacuum=INCREMENTAL; VACUUM")
        if lite.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:  # INCREMENTAL
            for _ in range(1024):  # bounded: at most 8 GiB of 4 KiB pages a call
                if lite.execute("PRAGMA freelist_count").fetchone()[0] == 0:
                    break
                lite.executescript("PRAGMA incremental_vacuum(2048)")  # execute(): one page
    finally:
        raw.close()


def changed_rows(session: Session, statement: Executable) -> int:
    """Rows an UPDATE or DELETE matched: a compare-and-set claim won when it is 1."""
    return cast("CursorResult[Any]", session.execute(statement)).rowcount
