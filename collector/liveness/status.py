"""The host status state machine; every change of ``Host.status`` goes through here.

``unknown``/``up`` → (overdue) ``late`` → probes → ``lost`` (an incident is open), or
``stopped``/``paused`` for planned silence; any batch brings the host back to ``up``. The
checker's moves are compare-and-set UPDATEs, so several checker processes on one database never
open (and alert) the same incident twice; the ingest path moves a host it holds locked.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from collector.db import changed_rows
from collector.incidents import lifecycle
from collector.models import Host, HostStatus, IncidentState, Resolution
from collector.settings import Settings

WATCHED = (HostStatus.UP, HostStatus.UNKNOWN)
SILENT = (HostStatus.LOST, HostStatus.STOPPED, HostStatus.PAUSED)


def grace_s(host: Host, settings: Settings) -> float:
    return host.grace_s or settings.grace_s


def startup_grace_s(host: Host, settings: Settings) -> float:
    """A host's first grace after a collector start: its agent may be waiting out its longest
    retry delay before it tries again."""
    return settings.agent_retry_max_s + grace_s(host, settings)


def transition(
    session: Session,
    host_id: int,
    old: tuple[HostStatus, ...],
    new: HostStatus,
    now: datetime,
    *where: Any,
    **values: Any,
) -> bool:
    """``UPDATE hosts SET status=new WHERE id=? AND status IN old AND ...``: True if we won."""
    stmt = update(Host).where(Host.id == host_id, Host.status.in_(old), *where)
    result = changed_rows(
        session,
        stmt.values(status=new, status_since=now, **values).execution_options(
            synchronize_session=False
        ),
    )
    return result == 1


def mark_up(host: Host, now: datetime) -> None:
    """A batch arrived: the host is up. The caller holds the host's row lock."""
    if host.status != HostStatus.UP:
        host.status = HostStatus.UP
        host.status_since = now


def watch_again(
    session: Session, *, old: tuple[HostStatus, ...], now: datetime, settings: Settings
) -> list[int]:
    """Hosts in ``old`` that were heard from become ``unknown`` with one startup grace from
    ``now``; their ids."""
    moved = []
    query = select(Host).where(Host.status.in_(old), Host.overdue_at.is_not(None))
    for host in session.scalars(query):
        overdue = now + timedelta(seconds=startup_grace_s(host, settings))
        if transition(session, host.id, old, HostStatus.UNKNOWN, now, overdue_at=overdue):
            moved.append(host.id)
    return moved


def set_paused(
    session: Session, *, host: Host, paused: bool, now: datetime, settings: Settings
) -> None:
    """Maintenance on or off. Ending it while the host is still silent resolves the pause's
    incident and watches the host again from now."""
    if paused == host.paused:
        return
    host.paused = paused
    if paused or host.status != HostStatus.PAUSED:
        session.flush()
        return
    incident = lifecycle.current_incident(session, host_id=host.id, states=(IncidentState.OPEN,))
    if incident is not None:
        incident.returned_at = None
        lifecycle.resolve(
            session,
            incident=incident,
            host=host,
            now=now,
            settings=settings,
            resolution=Resolution.UNPAUSED,
        )
    overdue = now + timedelta(seconds=grace_s(host, settings))
    session.flush()
    transition(session, host.id, (HostStatus.PAUSED,), HostStatus.UNKNOWN, now, overdue_at=overdue)
    session.refresh(host)
