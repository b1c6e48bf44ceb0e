"""Engine, sessions, migrations and every statement that differs between SQLite and PostgreSQL.

The rest of the collector writes dialect-neutral SQLAlchemy; where the two engines need
different SQL (bulk loads, upserts, row locks, time bucketing) it calls a helper from here
(bulk loads from ``collector.bulk``, re-exported).
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import CursorResult, Engine, Executable, Float, create_engine, event, inspect, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool, StaticPool
from sqlalchemy.sql.expression import FunctionElement

# Bulk writes of row tuples live in collector.bulk, SQLite's pragmas and BEGINs in
# collector.sqlite_tuning; callers know them as db.*.
from collector.bulk import copy_rows as copy_rows
from collector.bulk import insert_ignoring_duplicates as insert_ignoring_duplicates
from collector.errors import NotFound
from collector.sqlite_tuning import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS
from collector.sqlite_tuning import READ_ONLY, tune_sqlite
from collector.sqlite_tuning import WriteLockBusy as WriteLockBusy
from collector.sqlite_tuning import write_now as write_now

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
AFTER_COMMIT = "after_commit"
AFTER_ROLLBACK = "after_rollback"
MIGRATION_LOCK = 0x66776D67  # "fwmg": collectors started at once on PostgreSQL take turns
IDLE_PING_S = 10.0  # a pooled PostgreSQL connection idle this long is pinged before use


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and route them through psycopg 3."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (``is_postgres`` asks a session)."""
    return make_url(normalize_url(url)).get_backend_name() == "postgresql"


def make_engine(url: str, *, one_connection: bool = False) -> Engine:
    """``one_connection`` (SQLite): a single connection, for the event loop's stores, which
    must never wait for a pooled one (one caller at a time; see ``api.ingest._stored``)."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        pool: dict[str, Any] = {"poolclass": StaticPool} if one_connection else {}
        engine = create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}, **pool
        )
        tune_sqlite(engine)
        return engine
    engine = create_engine(url, pool_size=10, max_overflow=20)
    _ping_when_idle(engine)
    return engine


def existing_engine(url: str) -> Engine:
    """An engine on a database ``migrate`` made, for the commands that only read one (``storage``,
    ``guard show``): never creates an SQLite file; NotFound names the URL that has none."""
    file = make_url(normalize_url(url)).database if not is_postgres_url(url) else None
    engine = None if file and file != ":memory:" and not Path(file).is_file() else make_engine(url)
    if engine is None or not inspect(engine).has_table("hosts"):
        if engine is not None:
            engine.dispose()
        raise NotFound(f"no freezewatch database at {url} (pass --db or FREEZEWATCH_DB_URL)")
    return engine


def make_loop_engine(url: str) -> Engine | None:
    """SQLite on a file: one connection for the event loop's stores (``api.ingest._stored``),
    opened now, so the loop never opens one nor waits for a pooled one; None elsewhere."""
    parsed = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    engine = make_engine(url, one_connection=True)
    engine.connect().close()
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection before use only when it sat idle ``IDLE_PING_S``:
    ``pool_pre_ping`` costs a round trip at every checkout, one in four of a heartbeat's.
    A connection that breaks between two close uses (a server restart) fails that one request
    (the agent sends the batch again) and the pool replaces its connections."""

    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is not None and time.monotonic() - since < IDLE_PING_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # the pool drops this one and takes a fresh connection
            raise DisconnectionError("pooled connection did not answer its ping") from exc


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """The one commit point of a request or a background job: commit on success, roll back on
    error; then run what ``after_commit`` queued (work that must see the committed rows), or
    on a rollback what ``after_rollback`` queued."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        try:
            session.rollback()
        finally:  # a rollback that fails (the connection lost) ends the transaction too
            for undo in session.info.pop(AFTER_ROLLBACK, []):
                undo()
        raise
    finally:
        callbacks = session.info.pop(AFTER_COMMIT, [])
        session.close()
    for callback in callbacks:
        callback()


@contextmanager
def read_scope(factory: sessionmaker[Session], *, one_statement: bool = False) -> Iterator[Session]:
    """A unit of work that only reads, ended by a rollback. On SQLite its BEGIN is deferred: in
    WAL mode readers never wait for the one writer (``session_scope`` takes the write lock up
    front, see ``tune_sqlite``). ``one_statement``: a single query needs no snapshot of its
    own, so on PostgreSQL it runs in autocommit, without the BEGIN and ROLLBACK round trips (the
    scheduler's reading of due times, every second)."""
    session = factory()
    try:
        options: dict[str, Any] = {READ_ONLY: True}
        if one_statement and is_postgres(session):
            options["isolation_level"] = "AUTOCOMMIT"
        session.connection(execution_options=options)
        yield session
    finally:
        session.rollback()
        session.close()


def after_commit(session: Session, callback: Callable[[], object]) -> None:
    """Run ``callback`` once the session's transaction has committed (never on rollback)."""
    session.info.setdefault(AFTER_COMMIT, []).append(callback)


def after_rollback(session: Session, callback: Callable[[], object]) -> None:
    """Run ``callback`` if the session's transaction is rolled back (by ``session_scope``):
    for state kept outside the database that must not outlive what it was written with."""
    session.info.setdefault(AFTER_ROLLBACK, []).append(callback)


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
    """Bring the schema to head (idempotent; `serve` calls it before accepting traffic), one
    process at a time: on PostgreSQL under an advisory lock, on SQLite under a file lock
    (``sqlite_migration_lock``)."""
    cfg = alembic_config(url)
    if not is_postgres_url(url):
        with sqlite_migration_lock(url):
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


@contextmanager
def sqlite_migration_lock(url: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``<database>-migrate.lock`` beside the file, for the whole
    upgrade. Alembic commits each SQLite migration on its own (it does not take SQLite's DDL
    as transactional), so BEGIN IMMEDIATE serialized single steps only: a second collector
    could read the version between two steps of the first and run the next one again. A
    separate file, as closing any descriptor of the database itself would drop this
    process's SQLite locks. Nothing to lock for an in-memory database."""
    database = make_url(normalize_url(url)).database
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    with open(f"{database}-migrate.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield


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
