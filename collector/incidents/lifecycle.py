"""Incidents: opened with a last-gasp snapshot, resolved from the evidence the host brings back.

Resolution rule (DESIGN.md tables):

- planned/paused silences resolve as ``planned_reboot`` (new boot) or ``returned``;
- a new ``boot_id`` on return resolves at once as ``rebooted`` (post-mortem follows);
- ``agent_down`` on the same boot resolves at once as ``agent_recovered``;
- ``unreachable`` on the same boot waits for the agent's spool replay: as soon as the agent's
  own samples run without a hole longer than ``stall_min_s`` from the last sample before the
  silence up to a sample received after the return, it is a ``network_partition``; if a hole is
  still there ``resolve_settle_s`` after the return, the host itself stopped: ``stall``, with
  the hole's length as the stall length. All sample times compared here are the agent's clock,
  so clock offset between the hosts does not matter.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from collector.alerts import outbox as alerts
from collector.db import session_scope
from collector.models import (
    CHANNEL_NETCONSOLE,
    Boot,
    Host,
    Incident,
    IncidentSnapshot,
    Line,
    Sample,
)
from collector.readback.series import line_dict, sample_dict
from collector.settings import Settings
from collector.timeutil import to_epoch

log = logging.getLogger(__name__)

SNAPSHOT_MAX_SAMPLES = 2000
SNAPSHOT_MAX_LINES = 5000
KERNEL_ALIVE_TS_SLACK_S = 60.0


def open_incident(
    session: Session,
    *,
    host: Host,
    kind: str,
    probes: list[dict[str, Any]],
    late_at: datetime,
    now: datetime,
    settings: Settings,
    shutdown: bool = False,
    collector_started_at: datetime | None = None,
) -> Incident:
    """Record the incident and its snapshot; alert unless the silence was planned."""
    last_sample = session.scalar(
        select(Sample).where(Sample.host_id == host.id).order_by(Sample.ts.desc()).limit(1)
    )
    incident = Incident(
        host_id=host.id,
        kind=kind,
        state="open",
        last_heartbeat_at=host.last_seen_at,
        late_at=late_at,
        opened_at=now,
        boot_id=host.current_boot_id,
        last_sample_ts=last_sample.ts if last_sample else None,
        shutdown=shutdown,
        collector_down=bool(
            collector_started_at
            and host.last_seen_at is not None
            and host.last_seen_at < collector_started_at
        ),
        probes=probes,
    )
    session.add(incident)
    session.flush()
    take_snapshot(
        session, incident=incident, host=host, window_s=settings.snapshot_window_s, now=now
    )
    log.warning("host %s: incident %s opened (%s)", host.name, incident.id, kind)
    if kind not in ("planned", "paused"):
        alerts.enqueue_incident(
            session,
            event="incident.opened",
            incident=incident,
            host=host,
            now=now,
            settings=settings,
        )
    return incident


def take_snapshot(
    session: Session, *, incident: Incident, host: Host, window_s: float, now: datetime
) -> IncidentSnapshot:
    """Copy the samples and lines received in the ``window_s`` before the last heartbeat."""
    end = to_epoch(host.last_seen_at) or now.timestamp()
    start = end - window_s
    samples = list(
        session.scalars(
            select(Sample)
            .where(
                Sample.host_id == host.id,
                Sample.received_at >= start,
                Sample.received_at <= end + 1,
            )
            .order_by(Sample.ts.desc())
            .limit(SNAPSHOT_MAX_SAMPLES)
        )
    )[::-1]
    lines = list(
        session.scalars(
            select(Line)
            .where(Line.host_id == host.id, Line.received_at >= start, Line.received_at <= end + 1)
            .order_by(Line.ts.desc(), Line.id.desc())
            .limit(SNAPSHOT_MAX_LINES)
        )
    )[::-1]
    last = samples[-1] if samples else None
    snapshot = IncidentSnapshot(
        incident_id=incident.id,
        taken_at=now,
        window_start=start,
        window_end=end,
        samples=[sample_dict(s) for s in samples],
        lines=[line_dict(x) for x in lines],
        context={
            "vllm": (last.data or {}).get("vllm") if last else None,
            # Filled in by the matrix runner's issue: the run/profile active at the time.
            "matrix_run": None,
        },
    )
    session.add(snapshot)
    session.flush()
    return snapshot


def open_incident_for(session: Session, *, host_id: int) -> Incident | None:
    return session.scalar(
        select(Incident)
        .where(Incident.host_id == host_id, Incident.state == "open")
        .order_by(Incident.id.desc())
        .limit(1)
    )


def mark_returned(
    session: Session, *, host: Host, boot_id: str, now: datetime, settings: Settings
) -> Incident | None:
    """Heartbeats are back: resolve what the return alone decides, else start settling."""
    incident = open_incident_for(session, host_id=host.id)
    if incident is None:
        return None
    incident.returned_at = now
    incident.return_boot_id = boot_id
    new_boot = incident.boot_id is not None and boot_id != incident.boot_id
    if incident.kind in ("planned", "paused"):
        resolution: str | None = "planned_reboot" if new_boot else "returned"
    elif new_boot:
        resolution = "rebooted"
    elif incident.kind == "agent_down":
        resolution = "agent_recovered"
    else:
        resolution = None  # partition or stall: the agent's spool replay will tell
    if resolution is not None:
        resolve(
            session, incident=incident, host=host, now=now, settings=settings, resolution=resolution
        )
    else:
        incident.state = "resolving"
        session.flush()
    return incident


def mark_rebooted(
    session: Session, *, host: Host, boot_id: str, now: datetime, settings: Settings
) -> Incident | None:
    """A new boot after the host came back on its old one (the agent shipped the frozen boot's
    catch-up or spool first): an incident still settling on that old boot was a reboot."""
    incident = session.scalar(
        select(Incident)
        .where(Incident.host_id == host.id, Incident.state == "resolving")
        .order_by(Incident.id.desc())
        .limit(1)
    )
    if incident is None or incident.boot_id is None or incident.boot_id == boot_id:
        return None
    incident.return_boot_id = boot_id
    resolve(
        session, incident=incident, host=host, now=now, settings=settings, resolution="rebooted"
    )
    return incident


def resolve(
    session: Session,
    *,
    incident: Incident,
    host: Host,
    now: datetime,
    settings: Settings,
    resolution: str,
    stall_s: float | None = None,
) -> None:
    incident.state = "resolved"
    incident.resolution = resolution
    incident.resolved_at = now
    incident.stall_s = stall_s
    if resolution == "rebooted":
        incident.postmortem_state = "pending"
        incident.postmortem_due_at = now
    session.flush()
    log.warning("host %s: incident %s resolved as %s", host.name, incident.id, resolution)
    if incident.kind not in ("planned", "paused"):
        alerts.enqueue_incident(
            session,
            event="incident.resolved",
            incident=incident,
            host=host,
            now=now,
            settings=settings,
        )


def sample_hole(session: Session, *, incident: Incident, host: Host) -> tuple[float | None, bool]:
    """(longest hole between the agent's samples since the silence began, reached the return).

    "Reached the return" means a sample received after the host came back is in the run, so
    the replay covers the whole silence.
    """
    boot = session.scalar(
        select(Boot.id).where(Boot.host_id == host.id, Boot.boot_id == incident.return_boot_id)
    )
    if boot is None or incident.last_sample_ts is None or incident.returned_at is None:
        return None, False
    rows = session.execute(
        select(Sample.ts, Sample.received_at)
        .where(Sample.boot_pk == boot, Sample.ts >= incident.last_sample_ts)
        .order_by(Sample.ts)
    ).all()
    returned = incident.returned_at.timestamp()
    longest, previous, reached = 0.0, incident.last_sample_ts, False
    for ts, received_at in rows:
        longest = max(longest, ts - previous)
        previous = ts
        if received_at >= returned - 0.01:  # same batch as the return (datetime rounding)
            reached = True
            break
    return longest, reached


def settle_incidents(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> list[int]:
    """Decide partition vs stall for incidents whose host came back on the same boot."""
    with session_scope(session_factory) as session:
        ids = list(session.scalars(select(Incident.id).where(Incident.state == "resolving")))
    decided = []
    for incident_id in ids:
        with session_scope(session_factory) as session:
            incident = session.get(Incident, incident_id, with_for_update=True)
            if incident is None or incident.state != "resolving":
                continue
            host = session.get(Host, incident.host_id)
            assert host is not None and incident.returned_at is not None
            hole, reached = sample_hole(session, incident=incident, host=host)
            settled = now >= incident.returned_at + timedelta(seconds=settings.resolve_settle_s)
            if reached and hole is not None and hole <= settings.stall_min_s:
                resolve(
                    session,
                    incident=incident,
                    host=host,
                    now=now,
                    settings=settings,
                    resolution="network_partition",
                )
            elif settled:
                stall = hole if hole is not None and hole > settings.stall_min_s else None
                resolve(
                    session,
                    incident=incident,
                    host=host,
                    now=now,
                    settings=settings,
                    resolution="stall",
                    stall_s=stall,
                )
            else:
                continue
            decided.append(incident_id)
    return decided


def kernel_alive(session: Session, *, incident: Incident) -> dict[str, Any] | None:
    """The host's last netconsole line after its last heartbeat (up to its return), or None.

    A host whose agent went silent while its kernel still printed shows it here. Lines are
    looked up through the (host, ts) index: netconsole-first rows carry their arrival as
    ``ts``; ``KERNEL_ALIVE_TS_SLACK_S`` leaves room for agent-clock rows merged later.
    """
    heartbeat = to_epoch(incident.last_heartbeat_at)
    if heartbeat is None:
        return None
    query = select(func.max(Line.netconsole_received_at)).where(
        Line.host_id == incident.host_id,
        Line.ts >= heartbeat - KERNEL_ALIVE_TS_SLACK_S,
        Line.channels.op("&")(CHANNEL_NETCONSOLE) != 0,
        Line.netconsole_received_at > heartbeat,
    )
    returned = to_epoch(incident.returned_at)
    if returned is not None:
        query = query.where(Line.netconsole_received_at <= returned)
    last = session.scalar(query)
    if last is None:
        return None
    return {"last_netconsole_at": last, "seconds_after_last_heartbeat": round(last - heartbeat, 3)}


def kernel_alive_text(alive: dict[str, Any] | None) -> str:
    if alive is None:
        return ""
    seconds = alive["seconds_after_last_heartbeat"]
    return f"kernel alive: last netconsole line {seconds:.0f} s after the last heartbeat"


def downtime_s(incident: Incident) -> float | None:
    start = incident.last_heartbeat_at or incident.late_at
    end = incident.returned_at or incident.resolved_at
    return None if end is None else round((end - start).total_seconds(), 3)


def incident_dict(incident: Incident, *, host_name: str | None = None) -> dict[str, Any]:
    return {
        "id": incident.id,
        "host": host_name,
        "kind": incident.kind,
        "state": incident.state,
        "resolution": incident.resolution,
        "last_heartbeat_at": to_epoch(incident.last_heartbeat_at),
        "late_at": to_epoch(incident.late_at),
        "opened_at": to_epoch(incident.opened_at),
        "returned_at": to_epoch(incident.returned_at),
        "resolved_at": to_epoch(incident.resolved_at),
        "downtime_s": downtime_s(incident),
        "stall_s": incident.stall_s,
        "boot_id": incident.boot_id,
        "return_boot_id": incident.return_boot_id,
        "shutdown": incident.shutdown,
        "collector_down": incident.collector_down,
        "probes": incident.probes,
        "agent_restart": incident.agent_restart,
        "postmortem": {
            "state": incident.postmortem_state,
            "attempts": incident.postmortem_attempts,
        },
    }
