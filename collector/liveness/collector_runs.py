"""The collector's own lifetimes: the gap before a run's start is the collector's downtime.

A host's silence that began while the collector was down proves nothing, so a start gives every
watched host one fresh grace (``status.watch_again``); an incident whose silence began before
this run's start says so (``collector_down``).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.liveness.status import watch_again
from collector.models import CollectorRun, HostStatus
from collector.settings import Settings

log = logging.getLogger(__name__)


def current_run(session: Session) -> CollectorRun | None:
    return session.scalar(select(CollectorRun).order_by(CollectorRun.id.desc()).limit(1))


def start_collector_run(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> int:
    """Record this process's start and the collector downtime before it; reset host clocks.

    Hosts that were up get ``unknown`` and one fresh grace period from now: they were not
    watched while the collector was down, so their silence so far proves nothing. A host
    still silent after that grace is reported (its last heartbeat is kept on the incident).
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
        watch_again(session, old=(HostStatus.UP, HostStatus.LATE), now=now, settings=settings)
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
