"""Incidents: opened with a last-gasp snapshot, resolved from the evidence the host brings back.

Resolution rule (DESIGN.md tables):

- planned/paused silences resolve as ``planned_reboot`` (new boot) or ``returned``;
- a new ``boot_id`` on return resolves at once as ``rebooted`` (post-mortem follows);
- ``agent_down`` on the same boot resolves at once as ``agent_recovered``;
- ``unreachable`` on the same boot waits for the agent's spool replay. An agent that reports
  its backlog is waited for until the backlog is drained (at most ``resolve_backlog_max_s``):
  then its samples from the last one before the silence on are all in, and a hole longer than
  ``stall_min_s`` among them is a ``stall`` (with the hole's length), none a
  ``network_partition``; a stall is not called before the agent is heard again after the
  batch that ended the silence (that one may be a POST from before a cut, resent late by
  TCP). Should the host fall silent again first (a new incident), nothing is decided while it
  is silent, and the replay that ends that silence is looked at only up to this one's return:
  the later hole is the new incident's.
  An agent that does not report it: as soon as its samples run without
  such a hole up to one received after the return it is a ``network_partition``; a hole still
  there ``resolve_settle_s`` after the return is a ``stall``. Sample times are compared with
  each other on the agent's clock; "up to the return" also needs a sample taken near the return
  (the agent's measured clock offset reads the return on its clock): a replay that stops where
  the host froze, stored before any live sample, is not taken for a covered gap.

An incident whose silence began while the collector was down opens with its alert held
(``alert_held_until``, released by ``liveness.collector_runs``); resolved while still held, it
sends neither its opened nor its resolved alert.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.db import read_scope, session_scope
from collector.incidents.evidence import sample_hole, silent_again, silent_now
from collector.incidents.payload import enqueue_incident_alert
from collector.incidents.snapshot import take_snapshot
from collector.models import (
    SILENT_KINDS,
    UNRESOLVED,
    Host,
    Incident,
    IncidentKind,
    IncidentState,
    PostmortemState,
    Resolution,
)
from collector.readback.series import latest_sample
from collector.settings import Settings

log = logging.getLogger(__name__)


def open_incident(
    session: Session,
    *,
    host: Host,
    kind: IncidentKind,
    probes: list[dict[str, Any]],
    late_at: datetime,
    now: datetime,
    settings: Settings,
    shutdown: bool = False,
    collector_started_at: datetime | None = None,
) -> Incident:
    """Record the incident and its snapshot; alert unless the silence was planned, or began
    while the collector was down (then the alert waits out ``restart_alert_hold_s``)."""
    last_sample = latest_sample(session, host_id=host.id)
    collector_down = bool(
        collector_started_at
        and host.last_seen_at is not None
        and host.last_seen_at < collector_started_at
    )
    held = None
    if collector_down and collector_started_at is not None:
        release = collector_started_at + timedelta(seconds=settings.restart_alert_hold_s)
        held = release if release > now and kind not in SILENT_KINDS else None
    incident = Incident(
        host_id=host.id,
        kind=kind,
        state=IncidentState.OPEN,
        last_heartbeat_at=host.last_seen_at,
        late_at=late_at,
        opened_at=now,
        boot_id=host.current_boot_id,
        last_sample_ts=last_sample.ts if last_sample else None,
        shutdown=shutdown,
        collector_down=collector_down,
        alert_held_until=held,
        probes=probes,
    )
    session.add(incident)
    session.flush()
    take_snapshot(
        session, incident=incident, host=host, window_s=settings.snapshot_window_s, now=now
    )
    log.warning("host %s: incident %s opened (%s)", host.name, incident.id, kind)
    if held is not None:
        log.info("host %s: incident %s: alert held until %s", host.name, incident.id, held)
    elif kind not in SILENT_KINDS:
        enqueue_incident_alert(
            session,
            event="incident.opened",
            incident=incident,
            host=host,
            now=now,
            settings=settings,
        )
    return incident


def current_incident(
    session: Session, *, host_id: int, states: tuple[IncidentState, ...] = UNRESOLVED
) -> Incident | None:
    """The host's newest incident in one of ``states`` (by default: not yet resolved)."""
    return session.scalar(
        select(Incident)
        .where(Incident.host_id == host_id, Incident.state.in_(states))
        .order_by(Incident.id.desc())
        .limit(1)
    )


def mark_returned(
    session: Session, *, host: Host, boot_id: str, now: datetime, settings: Settings
) -> Incident | None:
    """Heartbeats are back: resolve what the return alone decides, else start settling."""
    incident = current_incident(session, host_id=host.id, states=(IncidentState.OPEN,))
    if incident is None:
        return None
    incident.returned_at = now
    incident.return_boot_id = boot_id
    new_boot = incident.boot_id is not None and boot_id != incident.boot_id
    resolution: Resolution | None
    if incident.kind in SILENT_KINDS:
        resolution = Resolution.PLANNED_REBOOT if new_boot else Resolution.RETURNED
    elif new_boot:
        resolution = Resolution.REBOOTED
    elif incident.kind == IncidentKind.AGENT_DOWN:
        resolution = Resolution.AGENT_RECOVERED
    else:
        resolution = None  # partition or stall: the agent's spool replay will tell
    if resolution is not None:
        resolve(
            session, incident=incident, host=host, now=now, settings=settings, resolution=resolution
        )
    else:
        incident.state = IncidentState.RESOLVING
        session.flush()
    return incident


def mark_rebooted(
    session: Session, *, host: Host, boot_id: str, now: datetime, settings: Settings
) -> Incident | None:
    """A new boot after the host came back on its old one (the agent shipped the frozen boot's
    catch-up or spool first): an incident still settling on that old boot was a reboot."""
    incident = current_incident(session, host_id=host.id, states=(IncidentState.RESOLVING,))
    if incident is None or incident.boot_id is None or incident.boot_id == boot_id:
        return None
    incident.return_boot_id = boot_id
    resolve(
        session,
        incident=incident,
        host=host,
        now=now,
        settings=settings,
        resolution=Resolution.REBOOTED,
    )
    return incident


def resolve(
    session: Session,
    *,
    incident: Incident,
    host: Host,
    now: datetime,
    settings: Settings,
    resolution: Resolution,
    stall_s: float | None = None,
) -> None:
    incident.state = IncidentState.RESOLVED
    incident.resolution = resolution
    incident.resolved_at = now
    incident.stall_s = stall_s
    if resolution == Resolution.REBOOTED:
        incident.postmortem_state = PostmortemState.PENDING
        incident.postmortem_due_at = now
    session.flush()
    log.warning("host %s: incident %s resolved as %s", host.name, incident.id, resolution)
    if incident.alert_held_until is not None:
        log.info("host %s: incident %s: back before its held alert", host.name, incident.id)
    elif incident.kind not in SILENT_KINDS:
        enqueue_incident_alert(
            session,
            event="incident.resolved",
            incident=incident,
            host=host,
            now=now,
            settings=settings,
        )


def settle_incidents(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    watching_since: datetime | None = None,
) -> list[int]:
    """Decide partition vs stall for incidents whose host came back on the same boot.
    ``watching_since``: when the collector last started after a downtime. The waits count from
    the latest of the return, then, and the host's return from a later silence, and not at all
    while it is silent again: while no collector ran or the host was silent, no replay could be
    stored, and such a time must not turn a replay still to come into a stall."""
    with read_scope(session_factory) as session:
        ids = list(
            session.scalars(
                select(Incident.id).where(Incident.state == IncidentState.RESOLVING, ~silent_now())
            )
        )
    decided = []
    for incident_id in ids:
        with session_scope(session_factory) as session:
            incident = session.get(Incident, incident_id, with_for_update=True)
            if incident is None or incident.state != IncidentState.RESOLVING:
                continue
            host = session.get(Host, incident.host_id)
            assert host is not None and incident.returned_at is not None
            again, back_at = silent_again(session, incident)
            if again and back_at is None:
                continue  # silent again: what this one still lacks comes when that one ends
            starts = (incident.returned_at, watching_since, back_at)
            since = (now - max(t for t in starts if t is not None)).total_seconds()
            reports = host.backlog_bytes is not None
            if host.backlog_bytes and since < settings.resolve_backlog_max_s:
                continue  # the replay is under way: what it brings decides
            # A later silence's samples (the host went silent again while this one settled)
            # are that incident's evidence: this one's ends where its run reaches its return.
            whole = reports and not again
            hole, reached = sample_hole(
                session, incident=incident, host=host, near_s=settings.stall_min_s, whole=whole
            )
            if reached and hole is not None and hole <= settings.stall_min_s:
                resolution, stall = Resolution.NETWORK_PARTITION, None
            elif (reports and reached) or _waited_enough(host, incident, since, settings):
                resolution = Resolution.STALL
                stall = hole if hole is not None and hole > settings.stall_min_s else None
            else:
                continue
            resolve(
                session,
                incident=incident,
                host=host,
                now=now,
                settings=settings,
                resolution=resolution,
                stall_s=stall,
            )
            decided.append(incident_id)
    return decided


def _waited_enough(host: Host, incident: Incident, since: float, settings: Settings) -> bool:
    """Whether a hole still there ``since`` s after the return is a stall. An agent that
    reports its backlog is waited for until it is heard again after the return: the batch
    that ended the silence may be a POST sent before the cut and resent by TCP once the link
    came back, its samples and backlog from before the cut; the agent's next batch says what
    its spool holds (and a loaded agent may send it seconds later). An agent that does not
    report it: ``resolve_settle_s``, whatever the backlog wait is set to."""
    if host.backlog_bytes is None:
        return since >= settings.resolve_settle_s
    if since >= settings.resolve_backlog_max_s:
        return True
    returned, heard = incident.returned_at, host.last_seen_at
    heard_since = heard is not None and returned is not None and heard > returned
    return since >= settings.resolve_settle_s and heard_since
