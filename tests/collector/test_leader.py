"""One leader at a time among replicas on a real PostgreSQL, and the next one takes over when it
lets go or its session dies; on SQLite the one process always leads."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from collector import db
from collector.leader import LEADER_LOCK, Leadership, held_elsewhere
from tests.support.postgres import drop_database, fresh_database


def leader_pid(url: str) -> int | None:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(
                text(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND objid = :key"
                ),
                {"key": LEADER_LOCK},
            ).scalar()
    finally:
        engine.dispose()


def someone_leads(url: str) -> bool:
    engine = db.make_engine(url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            return held_elsewhere(session)
    finally:
        engine.dispose()


def test_one_leader_at_a_time_and_a_successor_when_it_goes(postgres_url: str) -> None:
    url = fresh_database(postgres_url)
    first, second = Leadership(url), Leadership(url)
    try:
        assert not someone_leads(url)
        assert first.refresh() and not second.refresh()
        assert first.refresh() and first.held and not second.held  # still ours, checked
        assert someone_leads(url)

        first.release()  # a graceful stop
        assert not first.held
        assert second.refresh() and second.terms == 1
        assert not first.refresh()

        # The leader's process dies: the server ends its session, and the lock with it.
        pid = leader_pid(url)
        assert pid is not None
        engine = db.make_engine(url)
        with engine.connect() as conn:
            # with a timeout it waits for the backend to end (and its lock with it)
            conn.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})
        engine.dispose()
        assert first.refresh() and first.terms == 2
        assert not second.refresh() and not second.held  # it notices it lost the lead
        assert not second.refresh()  # and does not get it back while the other holds it
    finally:
        first.close()
        second.close()
        drop_database(url)


def test_on_sqlite_the_one_process_always_leads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    leadership = Leadership(url)
    assert leadership.refresh() and leadership.held and leadership.since is not None
    leadership.release()  # no one to hand the jobs to: they go on until the scheduler stops
    assert leadership.held and leadership.terms == 1
    leadership.close()
