"""prepared.py: a statement run on the driver stores and reads what the ORM would, on both
databases."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.models import Host, HostStatus, table_of
from collector.prepared import PerDialect, Prepared

hosts = table_of(Host)
SET = Prepared(
    update(hosts)
    .where(hosts.c.name == bindparam("name"), hosts.c.status == HostStatus.UP)
    .values(overdue_at=bindparam("overdue_at"), grace_s=bindparam("grace_s"))
)
READ = Prepared(
    select(hosts.c.grace_s, hosts.c.overdue_at, hosts.c.last_seen_at.is_(None)).where(
        hosts.c.name == bindparam("name")
    )
)


def test_values_written_on_the_driver_compare_and_read_as_the_orm_writes_them(
    db_url: str,
) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    factory = db.make_sessionmaker(engine)
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
    with db.session_scope(factory) as session:
        session.add_all(
            [
                Host(name="a", token_hash="a", status=HostStatus.UP),
                Host(name="b", token_hash="b", status=HostStatus.LATE),
                Host(name="c", token_hash="c", status=HostStatus.UP, overdue_at=at),
            ]
        )
    try:
        with db.session_scope(factory) as session:
            assert SET.rowcount(session, name="a", overdue_at=at, grace_s=2.5) == 1
            # the literal in the statement (status = 'up') holds: no row for b
            assert SET.rowcount(session, name="b", overdue_at=at, grace_s=2.5) == 0
            # typed as the ORM reads them: an aware datetime, a bool
            assert READ.first(session, name="a") == (2.5, at, True)
            assert READ.first(session, name="nobody") is None
        with db.read_scope(factory) as session:
            assert session.scalar(select(Host.overdue_at).where(Host.name == "a")) == at
            # the stored form compares with the ORM's: the same instant, equal
            same = select(Host.name).where(Host.overdue_at == at).order_by(Host.name)
            assert list(session.scalars(same)) == ["a", "c"]
            later = at + timedelta(microseconds=1)
            assert list(session.scalars(select(Host.name).where(Host.overdue_at >= later))) == []
            assert session.scalar(select(Host.overdue_at).where(Host.name == "b")) is None
    finally:
        engine.dispose()


def test_per_dialect_builds_once_for_the_sessions_dialect_and_reuses_it(
    factory: sessionmaker[Session],
) -> None:
    built: list[str] = []

    def build(session: Session) -> Any:
        built.append(session.get_bind().dialect.name)
        return db.insert(session, hosts).on_conflict_do_nothing(index_elements=["name"])

    upsert = PerDialect(build)
    with db.session_scope(factory) as session:
        for _ in range(3):  # the same row each time: stored once, built once
            session.connection().execute(
                upsert(session), {"name": "a", "token_hash": "a", "status": HostStatus.UP}
            )
        assert upsert(session) is upsert(session)
        dialect = session.get_bind().dialect.name
    with db.read_scope(factory) as session:
        assert session.scalars(select(Host.name)).all() == ["a"]
    assert built == [dialect]
