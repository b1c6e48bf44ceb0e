"""What the outbox tells the rest: the kernel alert cooldown's question (``queued_since``: a
dedup key starting with the prefix, queued after the cutoff, for that host; ``%`` and ``_`` in a
key are plain characters) and, once a delivery is committed, the delivery tick's cue to read
afresh (``QUEUED``). SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.alerts import outbox
from collector.alerts.notice import Notice
from collector.models import Host, HostStatus, WebhookTarget
from collector.timeutil import utcnow


def queue(session: Session, key: str, *, now: datetime, host_id: int | None = None) -> int:
    return outbox.enqueue(
        session,
        event="kernel.event",
        dedup_key=key,
        payload={},
        text="t",
        notice=Notice(title="t", body="b"),
        now=now,
        host_id=host_id,
    )


def test_queued_since_matches_the_prefix_literally_after_the_cutoff_for_the_host(
    factory: sessionmaker[Session],
) -> None:
    now = utcnow()
    with db.session_scope(factory) as session:
        hosts = [Host(name=n, token_hash=n, status=HostStatus.UP) for n in ("a", "b")]
        session.add_all([*hosts, WebhookTarget(url="http://127.0.0.1:9/")])
        session.flush()
        host_id, other_id = hosts[0].id, hosts[1].id
        assert queue(session, "kernel.event:gpu_xid:79:0000%01:17", now=now, host_id=host_id)

    def asked(prefix: str, *, host: int = host_id, ago_s: float = 60.0) -> bool:
        with db.read_scope(factory) as session:
            since = now - timedelta(seconds=ago_s)
            return outbox.queued_since(
                session, host_id=host, event="kernel.event", key_prefix=prefix, since=since
            )

    assert asked("kernel.event:gpu_xid:79:0000%01:")
    assert asked("kernel.event:")
    assert not asked("kernel.event:gpu_x_d:")  # "_" is not a wildcard
    assert not asked("kernel.event:%:")  # nor "%"
    assert not asked("kernel.event:gpu_xid:79:0000%01:", host=other_id)
    assert not asked("kernel.event:gpu_xid:79:0000%01:", ago_s=-1.0)  # queued before


def test_a_committed_delivery_tells_the_delivery_tick_to_read_afresh(
    factory: sessionmaker[Session],
) -> None:
    with db.session_scope(factory) as session:
        session.add(WebhookTarget(url="http://127.0.0.1:9/"))
    outbox.QUEUED.clear()
    try:
        with pytest.raises(RuntimeError), db.session_scope(factory) as session:
            assert queue(session, "rolled-back", now=utcnow()) == 1
            raise RuntimeError("the batch failed")
        assert not outbox.QUEUED.is_set()  # nothing was queued after all
        with db.session_scope(factory) as session:
            assert queue(session, "committed", now=utcnow()) == 1
            assert not outbox.QUEUED.is_set()  # not before the commit: the tick would miss it
        assert outbox.QUEUED.is_set()
    finally:
        outbox.QUEUED.clear()
