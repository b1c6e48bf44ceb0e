"""What an incident says: its summary (API, pages, alerts) and its alert payload and text."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector import links
from collector.alerts import outbox
from collector.incidents.message import first_kernel_event, incident_notice
from collector.models import CHANNEL_NETCONSOLE, Host, Incident, Line
from collector.readback.series import last_kernel_lines, latest_sample, sample_dict
from collector.settings import Settings
from collector.timeutil import to_epoch

# netconsole-first rows carry their arrival as ``ts``; this leaves room for agent-clock rows
# merged into them later.
KERNEL_ALIVE_TS_SLACK_S = 60.0


def kernel_alive(session: Session, *, incident: Incident) -> dict[str, Any] | None:
    """The host's last netconsole line after its last heartbeat (up to its return), or None.

    A host whose agent went silent while its kernel still printed shows it here. Lines are
    looked up through the (host, ts) index.
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
    end = incident.silence_end
    return None if end is None else round((end - incident.silence_start).total_seconds(), 3)


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
        "alert_held_until": to_epoch(incident.alert_held_until),
        "probes": incident.probes,
        "agent_restart": incident.agent_restart,
        "power_cycles": incident.power_cycles or [],
        "postmortem": {
            "state": incident.postmortem_state,
            "attempts": incident.postmortem_attempts,
        },
    }


def enqueue_incident_alert(
    session: Session,
    *,
    event: str,
    incident: Incident,
    host: Host,
    now: datetime,
    settings: Settings,
) -> int:
    """Queue ``incident.opened``/``incident.resolved`` for every target."""
    link = links.absolute(settings, links.incident_url(incident.id))
    alive = kernel_alive(session, incident=incident)
    summary = incident_dict(incident, host_name=host.name)
    if alive is not None:  # known only once netconsole brought a line after the last heartbeat
        summary["kernel_alive"] = alive
    sample = latest_sample(session, host_id=host.id)
    payload = {
        "type": event,
        "event": event,
        "timestamp": now.isoformat(),
        "host": {"name": host.name, "status": host.status, "boot_id": host.current_boot_id},
        "incident": summary,
        "last_sample": sample_dict(sample) if sample else None,
        "kernel_lines": last_kernel_lines(session, host_id=host.id),
        "url": link,
    }
    if event == "incident.opened":
        text = f"freezewatch: {host.name} is silent ({incident.kind}) — {link}"
    else:
        extra = f", stalled {incident.stall_s:.1f} s" if incident.stall_s else ""
        text = f"freezewatch: {host.name} is back ({incident.resolution}{extra}) — {link}"
    if alive is not None:
        text += f" ({kernel_alive_text(alive)})"
    kernel_event = first_kernel_event(
        session, incident=incident, window_s=settings.snapshot_window_s, now=now
    )
    payload["first_kernel_event"] = kernel_event
    notice = incident_notice(
        event=event,
        incident=incident,
        host=host,
        summary=summary,
        kernel_event=kernel_event,
        alive_text=kernel_alive_text(alive),
        link=link,
    )
    return outbox.enqueue(
        session,
        event=event,
        dedup_key=f"{event}:{incident.id}",
        payload=payload,
        text=text,
        notice=notice,
        now=now,
        host_id=host.id,
        incident_id=incident.id,
    )
