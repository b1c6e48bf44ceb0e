"""The collector's own lifetimes: the gap before a run's start is the collector's downtime.

A host's silence that began while the collector was down proves nothing, so a start gives every
watched host one startup grace (its grace plus the agents' longest retry delay,
``status.watch_again``); an incident whose silence began before this run's start says so
(``collector_down``), and its opened alert is held until ``restart_alert_hold_s`` after the
start (``release_held_alerts``): a host back before then was only waiting to reconnect.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import changed_rows, session_scope
from collector.incidents.payload import enqueue_incident_alert
from collector.liveness.status import watch_again
from collector.models import CollectorRun, Host, HostStatus, Incident, IncidentState
from collector.settings import Settings

log = logging.getLogger(__name__)


def current_run(session: Session) -> CollectorRun | None:
    return session.scalar(select(CollectorRun).order_by(CollectorRun.id.desc()).limit(1))


def start_collector_run(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> int:
    """Record this process's start and the collector downtime before it; reset host clocks.

    Hosts that were up get ``unknown`` and one startup grace from now: they were not watched
    while the collector was down, so their silence so far proves nothing. A host still silent
    after that grace gets its incident (its last heartbeat is kept on it); it alerts once the
    hold is over.
    """
    with session_scope(session_factory) as session:
        previous = current_run(session)
        down_since = None
        if previous is not None:
            down_since = previous.stopped_at or previous.last_alive_at
        run = CollectorRun(
            started_at=now, last_alive_at=now, down_since=down_since, pid=os.getpid()
        )
        session.add(run)
        old = (HostStatus.UP, HostStatus.LATE, HostStatus.UNKNOWN)
        watch_again(session, old=old, now=now, settings=settings)
        session.flush()
        if down_since is not None:
            log.warning(
                "collector was down from %s to %s (%.1f s)",
                down_since.isoformat(),
                now.isoformat(),
                (now - down_since).total_seconds(),
            )
        return run.id


def tick_collector_alive(
    session_factory: sessionmaker[Session], *, run_id: int, now: datetime
) -> None:
    with session_scope(session_factory) as session:
        session.execute(
            update(CollectorRun).where(CollectorRun.id == run_id).values(last_alive_at=now)
        )


def stop_collector_run(
    session_factory: sessionmaker[Session], *, run_id: int, now: datetime
) -> None:
    with session_scope(session_factory) as session:
        session.execute(
            update(CollectorRun)
            .where(CollectorRun.id == run_id)
            .values(last_alive_at=now, stopped_at=now)
        )


def release_held_alerts(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> list[int]:
    """Queue the opened alert of every held incident whose host is still silent at the end of
    its hold; the ids released. (A resolved one stays quiet: ``lifecycle.resolve``.)"""
    with session_scope(session_factory) as session:
        due = list(
            session.scalars(
                select(Incident.id).where(
                    Incident.alert_held_until <= now, Incident.state == IncidentState.OPEN
                )
            )
        )
    released = []
    for incident_id in due:
        with session_scope(session_factory) as session:
            claimed = changed_rows(
                session,
                update(Incident)
                .where(
                    Incident.id == incident_id,
                    Incident.state == IncidentState.OPEN,
                    Incident.alert_held_until.is_not(None),
                )
                .values(alert_held_until=None)
                .execution_options(synchronize_session=False),
            )
            if claimed != 1:
                continue  # resolved meanwhile, or another checker released it
            incident = session.get(Incident, incident_id, populate_existing=True)
            assert incident is not None
            host = session.get(Host, incident.host_id)
            assert host is not None
            log.warning(
                "host %s: incident %s: still silent %s s after the collector's start: alerting",
                host.name,
                incident.id,
                settings.restart_alert_hold_s,
            )
            enqueue_incident_alert(
                session,
                event="incident.opened",
                incident=incident,
                host=host,
                now=now,
                settings=settings,
            )
            released.append(incident_id)
    return released
