"""Which collector process runs the singleton jobs (the heartbeat checker and its probes, alert
delivery, pruning, post-mortems, matrix cron firings) when several share one PostgreSQL.

The leader is the process holding a session-level advisory lock on a connection of its own. A
killed leader's connection closes and the lock goes with it; a vanished one (its machine died,
its link dropped) is noticed by the server's TCP keepalive within ``DEAD_PEER_S``. Every process
calls ``refresh`` every ``leader_check_s``: the first to find the lock free leads. On SQLite there
is one process, and it always leads. The jobs themselves claim their rows with conditional
updates, so even two leaders for a moment (a partition) never send an alert twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from collector.db import is_postgres, is_postgres_url, normalize_url
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)

LEADER_LOCK = 0x66776C64  # "fwld"; the migration lock is another key
# How long the server keeps a silent leader's session (and lock): keepalive idle 5 s, then
# 3 probes 2 s apart; a write unanswered for 10 s also ends it.
DEAD_PEER_S = 11.0
_SESSION = (  # each on its own: a server too old for one still takes the others
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
    "SET tcp_user_timeout = 10000",
    "SET statement_timeout = 5000",
)
# Keepalive on our side of the connection too (libpq), so a dead server is noticed.
_CLIENT = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}
_HELD_ELSEWHERE = text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = 0 AND objid = :key AND objsubid = 1 AND pid <> pg_backend_pid())"
)


class Leadership:
    """This process's claim to the singleton jobs; ``refresh()`` takes or checks it."""

    def __init__(self, db_url: str, *, clock: Callable[[], float] = time.time) -> None:
        self._postgres = is_postgres_url(db_url)
        self._engine: Engine | None = (
            create_engine(normalize_url(db_url), poolclass=NullPool, connect_args=_CLIENT)
            if self._postgres
            else None
        )
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._clock = clock
        # When this process last became the leader; None while it is not.
        self.since: datetime | None = None
        self.terms = 0  # how many times it became the leader

    @property
    def held(self) -> bool:
        return self.since is not None

    def refresh(self) -> bool:
        """Take the lock if it is free, or check that ours still stands; whether we lead."""
        with self._lock:
            if self._engine is None:
                if self.since is None:
                    self._became()
                return True
            try:
                if self._conn is None:
                    self._conn = self._engine.connect().execution_options(
                        isolation_level="AUTOCOMMIT"
                    )
                    for setting in _SESSION:
                        with contextlib.suppress(SQLAlchemyError):
                            self._conn.exec_driver_sql(setting)
                if self.since is not None:
                    self._conn.exec_driver_sql("SELECT 1")  # our session, so our lock, stands
                    return True
                got = self._conn.execute(
                    text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_LOCK}
                ).scalar_one()
            except SQLAlchemyError as exc:
                if self.since is not None:
                    log.warning("lost the leader lock (%s): singleton jobs stop here", exc)
                self._close()
                return False
            if got:
                self._became()
            return bool(got)

    def release(self) -> None:
        """Let go now (a graceful stop): another process takes over on its next refresh. On
        SQLite there is no other process: the jobs go on until the scheduler stops."""
        with self._lock:
            if self._engine is None:
                return
            if self.since is not None and self._conn is not None:
                # Unlocked before the session closes: the server ends a closed session a
                # moment later, and the successor's next refresh must not race that.
                with contextlib.suppress(SQLAlchemyError):
                    self._conn.execute(
                        text("SELECT pg_advisory_unlock(:key)"), {"key": LEADER_LOCK}
                    )
                log.info("leader lock released")
            self._close()

    def close(self) -> None:
        """Release, and close the engine (the app's shutdown)."""
        self.release()
        if self._engine is not None:
            self._engine.dispose()

    def _became(self) -> None:
        self.since = from_epoch(self._clock())
        self.terms += 1
        log.info("this collector now runs the singleton jobs (leader since %s)", self.since)

    def _close(self) -> None:
        self.since = None
        if self._conn is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._conn.close()  # ends the session: the server drops its lock
            self._conn = None


def held_elsewhere(session: Session) -> bool:
    """Whether another process holds the leader lock now: a collector is watching the hosts.
    Always False on SQLite (one process)."""
    if not is_postgres(session):
        return False
    return bool(session.execute(_HELD_ELSEWHERE, {"key": LEADER_LOCK}).scalar_one())
