"""The collector's own lifetimes: the gap before a run's start is the collector's downtime.

A host's silence that began while the collector was down proves nothing, so a start gives every
watched host one startup grace (its grace plus the agents' longest retry delay,
``status.watch_again``); an incident whose silence began before that start says so
(``collector_down``), and its opened alert is held until ``restart_alert_hold_s`` after the
start (``release_held_alerts``): a host back before then was only waiting to reconnect.

With replicas on one PostgreSQL, a process started while another one leads (``joined``) was
preceded by no downtime: agents kept reaching the live one. Its start changes nothing for the
hosts, and a takeover of the singleton jobs is no start at all: the watch began at the last
start that was not joined (``watch_started_at``).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta

from sqlalchemy import Float, Integer, bindparam, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import changed_rows, read_scope, session_scope
from collector.incidents.lifecycle import settle_incidents
from collector.incidents.payload import enqueue_incident_alert
from collector.liveness.status import watch_again
from collector.models import CollectorRun, Host, HostStatus, Incident, IncidentState, table_of
from collector.prepared import Prepared
from collector.settings import Settings

log = logging.getLogger(__name__)


# Runs looked at for the last sign of life before a start (replicas stop in any order).
RECENT_RUNS = 20


def watch_started_at(session: Session) -> datetime | None:
    """When the collector last started after a downtime: a silence older than that began while
    no collector watched. Replicas joining later and takeovers do not move it."""
    return session.scalar(
        select(CollectorRun.started_at)
        .where(CollectorRun.joined.is_(False))
        .order_by(CollectorRun.id.desc())
        .limit(1)
    )


def settle_returned(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> list[int]:
    """``settle_incidents``, its waits counted from the collector's last start after a downtime
    where that came after a host's return (the replay could not be stored meanwhile)."""
    with read_scope(session_factory) as session:
        started_at = watch_started_at(session)
    return settle_incidents(session_factory, now=now, settings=settings, watching_since=started_at)


def start_collector_run(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    joined: bool = False,
) -> int:
    """Record this process's start and the collector downtime before it; reset host clocks.

    Hosts that were up get ``unknown`` and one startup grace from now: they were not watched
    while the collector was down, so their silence so far proves nothing. A host still silent
    after that grace gets its incident (its last heartbeat is kept on it); it alerts once the
    hold is over. ``joined``: another collector process leads (``leader.held_elsewhere``):
    there was no downtime and the hosts are left as they are.
    """
    with session_scope(session_factory) as session:
        down_since = None
        if not joined:
            previous = session.scalars(
                select(CollectorRun).order_by(CollectorRun.id.desc()).limit(RECENT_RUNS)
            ).all()
            down_since = max((r.stopped_at or r.last_alive_at for r in previous), default=None)
        run = CollectorRun(
            started_at=now,
            last_alive_at=now,
            down_since=down_since,
            pid=os.getpid(),
            joined=joined,
        )
        session.add(run)
        if joined:
            session.flush()
            log.info("collector started next to a running one: the hosts stay as they are")
            return run.id
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
    session_factory: sessionmaker[Session],
    *,
    run_id: int,
    now: datetime,
    lag_s: float = 0.0,
    stale_s: float = 10.0,
) -> float:
    """This process is alive and ``lag_s`` behind on ingest; returns the largest lag of the
    processes alive (heard from within ``stale_s``): the one silences are judged with."""
    with session_scope(session_factory) as session:
        _ALIVE.rowcount(session, run_id=run_id, now=now, lag_s=round(lag_s, 3))
        (lag,) = _FLEET_LAG.first(session, since=now - timedelta(seconds=stale_s)) or (0.0,)
        return float(lag)


_RUNS = table_of(CollectorRun)
# Every alive tick of every process (on a driver: an idle collector's CPU is mostly its ticks).
_ALIVE = Prepared(
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("run_id", type_=Integer))
    .values(
        last_alive_at=bindparam("now", type_=_RUNS.c.last_alive_at.type),
        ingest_lag_s=bindparam("lag_s", type_=Float),
    )
)
_FLEET_LAG = Prepared(
    select(func.coalesce(func.max(_RUNS.c.ingest_lag_s), 0.0)).where(
        _RUNS.c.stopped_at.is_(None),
        _RUNS.c.last_alive_at >= bindparam("since", type_=_RUNS.c.last_alive_at.type),
    )
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
    with read_scope(session_factory) as session:
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
