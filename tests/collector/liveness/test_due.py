"""liveness.due: each periodic step's earliest due time from one read, and the gate that lets
the scheduler's ticks sleep until then (on SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.liveness import due
from collector.models import (
    Delivery,
    DeliveryState,
    Host,
    HostStatus,
    Incident,
    IncidentState,
    PostmortemState,
    WebhookTarget,
)
from collector.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)
S = timedelta(seconds=1)


def host(name: str, status: HostStatus, **values: object) -> Host:
    return Host(name=name, token_hash=name, status=status, **values)


def incident(h: Host, **values: object) -> Incident:
    return Incident(host_id=h.id, kind="unreachable", late_at=T0, opened_at=T0, **values)


def times(factory: sessionmaker[Session], settings: Settings) -> dict[str, datetime | None]:
    with db.read_scope(factory) as session:
        return due.due_times(session, settings=settings)


def test_nothing_stored_is_never_due(factory: sessionmaker[Session]) -> None:
    settings = Settings()
    with db.session_scope(factory) as session:
        session.add(host("quiet", HostStatus.UNKNOWN))  # never heard from: no overdue time
        session.add(host("gone", HostStatus.LOST, overdue_at=T0 - 60 * S))
    assert set(times(factory, settings).values()) == {None}


def test_each_step_is_due_at_its_earliest_row(factory: sessionmaker[Session]) -> None:
    settings = Settings(probe_lead_s=1.0, late_reclaim_s=30.0)
    with db.session_scope(factory) as session:
        up = host("up", HostStatus.UP, overdue_at=T0 + 3 * S)
        session.add_all(
            [
                up,
                host("later", HostStatus.UNKNOWN, overdue_at=T0 + 9 * S),
                host("stopped", HostStatus.STOPPED, overdue_at=T0 - 9 * S),  # not watched
                host("late", HostStatus.LATE, status_since=T0 - 10 * S, overdue_at=T0),
            ]
        )
        session.flush()
        session.add_all(
            [
                incident(up, state=IncidentState.OPEN, alert_held_until=T0 + 20 * S),
                incident(
                    up,
                    state=IncidentState.RESOLVED,
                    alert_held_until=T0 + 5 * S,  # resolved: no alert to release
                    postmortem_state=PostmortemState.PENDING,
                    postmortem_due_at=T0 + 7 * S,
                ),
            ]
        )
        target = WebhookTarget(url="http://127.0.0.1:9/hook")
        session.add(target)
        session.flush()
        for k, (state, attempt, claimed) in enumerate(
            [
                (DeliveryState.PENDING, T0 + 4 * S, None),
                (DeliveryState.SENDING, T0 + 40 * S, T0 + 2 * S),
                (DeliveryState.DELIVERED, T0 - 50 * S, None),
            ]
        ):
            session.add(
                Delivery(
                    msg_id=f"m{k}",
                    target_id=target.id,
                    dedup_key=f"d{k}",
                    event="incident.opened",
                    body="{}",
                    state=state,
                    next_attempt_at=attempt,
                    claimed_until=claimed,
                    created_at=T0,
                )
            )
    found = times(factory, settings)
    assert found == {
        due.HEARTBEATS: T0 + 3 * S,  # before the late host's reclaim (T0 + 20 s)
        due.PRE_PROBES: T0 + 2 * S,
        due.SETTLE: None,
        due.RELEASE: T0 + 20 * S,
        due.DELIVER: T0 + 2 * S,  # the stale claim
        due.POSTMORTEMS: T0 + 7 * S,
    }


def test_a_stale_late_claim_and_a_resolving_incident_are_due(
    factory: sessionmaker[Session],
) -> None:
    settings = Settings(late_reclaim_s=30.0)
    with db.session_scope(factory) as session:
        late = host("late", HostStatus.LATE, status_since=T0, overdue_at=T0 - 3 * S)
        session.add(late)
        session.flush()
        session.add(incident(late, state=IncidentState.RESOLVING))
    found = times(factory, settings)
    assert found[due.HEARTBEATS] == T0 + 30 * S
    assert found[due.SETTLE] is not None and found[due.SETTLE] < T0


def test_a_resolving_incident_waits_while_its_host_is_silent_again(
    factory: sessionmaker[Session],
) -> None:
    """Its settling decides nothing until the later silence ends (``evidence.silent_again``):
    a host back and then gone for good must not have it run every tick, for ever."""
    settings = Settings()
    with db.session_scope(factory) as session:
        flapping, other = host("flapping", HostStatus.LOST), host("other", HostStatus.LOST)
        session.add_all([flapping, other])
        session.flush()
        session.add(incident(flapping, state=IncidentState.RESOLVING))
        session.add(incident(other, state=IncidentState.OPEN))  # another host's: no matter
        session.flush()
        again = incident(flapping, state=IncidentState.OPEN)
        session.add(again)
    assert times(factory, settings)[due.SETTLE] is None
    with db.session_scope(factory) as session:
        later = session.get_one(Incident, again.id)
        later.state, later.returned_at = IncidentState.RESOLVING, T0 + 5 * S  # back again
    found = times(factory, settings)[due.SETTLE]
    assert found is not None and found < T0


def test_the_gate_reads_again_when_a_time_comes_or_the_reading_is_old(
    factory: sessionmaker[Session],
) -> None:
    settings = Settings(probe_lead_s=1.0)
    with db.session_scope(factory) as session:
        session.add(host("up", HostStatus.UP, overdue_at=T0 + 3 * S))
    gate = due.Due(factory, settings=settings, max_age_s=10.0)
    assert not gate(due.HEARTBEATS, T0)
    assert not gate(due.PRE_PROBES, T0 + 1.5 * S)
    assert gate.reads == 1  # nothing came: answered from the first reading
    assert gate(due.PRE_PROBES, T0 + 2 * S)  # the lead before overdue came: read, and due
    assert gate.reads == 2
    with db.session_scope(factory) as session:
        session.query(Host).update({Host.overdue_at: T0 + 6 * S})  # a heartbeat
    assert not gate(due.HEARTBEATS, T0 + 3 * S)
    assert gate.reads == 3
    gate.expire()
    assert not gate(due.HEARTBEATS, T0 + 3 * S) and gate.reads == 4


def test_a_time_moved_earlier_elsewhere_is_seen_within_the_readings_age(
    factory: sessionmaker[Session],
) -> None:
    with db.session_scope(factory) as session:
        session.add(host("up", HostStatus.UP, overdue_at=T0 + 60 * S))
    gate = due.Due(factory, settings=Settings(), max_age_s=1.0)
    assert not gate(due.HEARTBEATS, T0)
    with db.session_scope(factory) as session:  # another process: a shorter grace
        session.query(Host).update({Host.overdue_at: T0 + 0.5 * S})
    assert not gate(due.HEARTBEATS, T0 + 0.6 * S)  # the reading is young: not seen yet
    assert gate(due.HEARTBEATS, T0 + 1 * S)  # a second old: read again, due
    assert gate.reads == 2


def test_a_job_may_sleep_until_the_reading_expires_unless_its_step_is_due(
    factory: sessionmaker[Session],
) -> None:
    settings = Settings(probe_lead_s=1.0, late_reclaim_s=30.0)
    with db.session_scope(factory) as session:
        session.add(host("up", HostStatus.UP, overdue_at=T0 + 3 * S))
        session.add(host("late", HostStatus.LATE, status_since=T0 - 40 * S))  # its claim stale
    gate = due.Due(factory, settings=settings, max_age_s=10.0)
    assert gate.idle_for(T0, due.PRE_PROBES) == timedelta(0)  # nothing read yet
    assert gate(due.HEARTBEATS, T0)  # the stale late claim
    assert gate.idle_for(T0, due.HEARTBEATS) == timedelta(0)
    # pre-probes: nothing before the up host's lead, when the reading is taken again
    assert gate.idle_for(T0, due.PRE_PROBES) == 2 * S
    assert gate.idle_for(T0 + 1.5 * S, due.PRE_PROBES) == 0.5 * S
    gate.expire()
    assert gate.idle_for(T0, due.PRE_PROBES) == timedelta(0)


def test_a_fresh_question_reads_again_whatever_the_readings_age(
    factory: sessionmaker[Session],
) -> None:
    gate = due.Due(factory, settings=Settings(), max_age_s=10.0)
    assert not gate(due.DELIVER, T0)
    target = WebhookTarget(url="http://127.0.0.1:9/hook")
    with db.session_scope(factory) as session:  # ingest queues an alert
        session.add(target)
        session.flush()
        session.add(
            Delivery(
                msg_id="m",
                target_id=target.id,
                dedup_key="d",
                event="kernel.event",
                body="{}",
                next_attempt_at=T0,
                created_at=T0,
            )
        )
    assert not gate(due.DELIVER, T0 + 0.1 * S)  # the young reading does not know it
    assert gate(due.DELIVER, T0 + 0.1 * S, fresh=True)
    assert gate.reads == 2
