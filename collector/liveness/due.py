"""When the scheduler's periodic steps next have work, from one indexed read a second at most.

The steps tick (the heartbeat check every 0.25 s) so that a silence is seen within a tick; each
used to open a transaction and ask whether anything was due, and with nothing due that was
most of an idle collector's CPU. ``Due`` reads every step's earliest due time in one statement
and answers from that reading until the earliest of them comes or the reading is ``max_age_s``
old. A due time only ever moves earlier through something the reading cannot foresee (another
collector process, a host's shorter grace, a host back with a replay to settle): that is seen
within ``max_age_s``. The delivery tick reads afresh once this process queued an alert
(``outbox.QUEUED``: it goes out within its tick, as before); one queued by another process is
seen within ``max_age_s``. The steps themselves still decide what is due; the reading only lets
them sleep, and a ticking job may sleep through its ticks until it is read again
(``idle_for``).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func, literal, or_, select
from sqlalchemy.orm import Session, sessionmaker

from collector.db import read_scope
from collector.incidents.evidence import silent_now
from collector.liveness.status import WATCHED
from collector.models import (
    Delivery,
    DeliveryState,
    Host,
    HostStatus,
    Incident,
    IncidentState,
    PostmortemState,
)
from collector.prepared import Prepared
from collector.settings import Settings

HEARTBEATS = "heartbeats"  # check_heartbeats: a watched host overdue, or a late claim stale
PRE_PROBES = "pre_probes"  # start_pre_probes: a watched host within the probe lead of overdue
SETTLE = "settle"  # settle_incidents: an incident resolving, its host not silent again
RELEASE = "release"  # release_held_alerts: a held alert's hold over
DELIVER = "deliver"  # deliver_due_alerts: an outbox row due, or its sender's lease over
POSTMORTEMS = "postmortems"  # collect_postmortems: a post-mortem due
MAX_AGE_S = 1.0

# Far in the past: due at once (a resolving incident is settled every tick).
_NOW = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _earliest(*column: Any) -> Any:
    return select(func.min(*column)).scalar_subquery()


_READ = Prepared(
    select(
        _earliest(Host.overdue_at).where(or_(*(Host.status == s for s in WATCHED))),
        _earliest(Host.status_since).where(Host.status == HostStatus.LATE),
        select(literal(1))
        .where(Incident.state == IncidentState.RESOLVING, ~silent_now())
        .limit(1)
        .scalar_subquery(),
        _earliest(Incident.alert_held_until).where(Incident.state == IncidentState.OPEN),
        _earliest(Delivery.next_attempt_at).where(Delivery.state == DeliveryState.PENDING),
        _earliest(Delivery.claimed_until).where(Delivery.state == DeliveryState.SENDING),
        _earliest(Incident.postmortem_due_at).where(
            Incident.postmortem_state == PostmortemState.PENDING
        ),
    )
)


def due_times(session: Session, *, settings: Settings) -> dict[str, datetime | None]:
    """Each step's earliest due time (None: nothing to do until something changes)."""
    row = _READ.first(session)
    assert row is not None  # one row: every column an aggregate
    overdue, late, resolving, held, pending, sending, postmortem = row
    lead = timedelta(seconds=settings.probe_lead_s)  # at most: lead_s caps it at half the grace
    reclaim = None if late is None else late + timedelta(seconds=settings.late_reclaim_s)
    return {
        HEARTBEATS: _first(overdue, reclaim),
        PRE_PROBES: None if overdue is None else overdue - lead,
        SETTLE: _NOW if resolving else None,
        RELEASE: held,
        DELIVER: _first(pending, sending),
        POSTMORTEMS: postmortem,
    }


def _first(*times: datetime | None) -> datetime | None:
    return min((t for t in times if t is not None), default=None)


class Due:
    """The scheduler's reading of ``due_times``, taken again when it is stale or reached."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        settings: Settings,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self._factory = factory
        self._settings = settings
        self._max_age = timedelta(seconds=max_age_s)
        self._lock = threading.Lock()
        self._times: dict[str, datetime | None] = {}
        self._valid_until: datetime | None = None  # read again from then on
        self.reads = 0

    def __call__(self, step: str, now: datetime, *, fresh: bool = False) -> bool:
        """May ``step`` have work at ``now``? (False only when surely not.) ``fresh``: read
        again whatever the reading's age."""
        with self._lock:
            if fresh or self._valid_until is None or now >= self._valid_until:
                self._read(now)
            due = self._times[step]
            return due is not None and due <= now

    def idle_for(self, now: datetime, *steps: str) -> timedelta:
        """How long from ``now`` none of ``steps`` can be due, as far as the reading knows (it
        is read again then): a job ticking for them may sleep that long."""
        with self._lock:
            if self._valid_until is None or self._valid_until <= now:
                return timedelta(0)
            due_now = any((t := self._times[s]) is not None and t <= now for s in steps)
            return timedelta(0) if due_now else self._valid_until - now

    def expire(self) -> None:
        """Read again on the next question (a step just changed what is due)."""
        with self._lock:
            self._valid_until = None

    def _read(self, now: datetime) -> None:
        with read_scope(self._factory, one_statement=True) as session:
            self._times = due_times(session, settings=self._settings)
        self.reads += 1
        coming = [t for t in self._times.values() if t is not None and t > now]
        self._valid_until = min([*coming, now + self._max_age])
