"""What an incident says: its summary (API, pages, alerts) and its alert payload and text."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector import links
from collector.alerts import outbox
from collector.incidents.message import first_kernel_event, incident_notice
from collector.models import (
    CHANNEL_NETCONSOLE,
    Host,
    Incident,
    IncidentKind,
    IncidentState,
    Line,
    PostmortemState,
    Resolution,
)
from collector.readback.series import recent_evidence
from collector.schemas import OutModel
from collector.settings import Settings
from collector.timeutil import to_epoch

# netconsole-first rows carry their arrival as ``ts``; this leaves room for agent-clock rows
# merged into them later.
KERNEL_ALIVE_TS_SLACK_S = 60.0


class KernelAlive(OutModel):
    """The kernel still printed over netconsole after the agent's last heartbeat."""

    last_netconsole_at: float
    seconds_after_last_heartbeat: float


class PostmortemOut(OutModel):
    state: PostmortemState
    attempts: int


class IncidentOut(OutModel):
    """An incident's summary (API, pages, alert payloads); instants in epoch seconds."""

    id: int
    host: str | None
    kind: IncidentKind
    state: IncidentState
    resolution: Resolution | None
    last_heartbeat_at: float | None
    late_at: float
    opened_at: float
    returned_at: float | None
    resolved_at: float | None
    downtime_s: float | None
    stall_s: float | None
    boot_id: str | None
    return_boot_id: str | None
    shutdown: bool
    collector_down: bool
    # Until when the opened alert waits (the silence began while the collector was down).
    alert_held_until: float | None
    probes: list[dict[str, Any]]
    agent_restart: dict[str, Any] | None
    # Every use of the host's power-cycle hook during this silence (matrix campaigns).
    power_cycles: list[dict[str, Any]]
    postmortem: PostmortemOut

    @classmethod
    def of(cls, incident: Incident, *, host_name: str | None = None) -> IncidentOut:
        return cls.model_validate(
            {
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
        )


def kernel_alive(session: Session, *, incident: Incident) -> KernelAlive | None:
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
    return KernelAlive.model_validate(
        {"last_netconsole_at": last, "seconds_after_last_heartbeat": round(last - heartbeat, 3)}
    )


def kernel_alive_text(alive: KernelAlive | None) -> str:
    if alive is None:
        return ""
    seconds = alive.seconds_after_last_heartbeat
    return f"kernel alive: last netconsole line {seconds:.0f} s after the last heartbeat"


def downtime_s(incident: Incident) -> float | None:
    end = incident.silence_end
    return None if end is None else round((end - incident.silence_start).total_seconds(), 3)


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
    summary = IncidentOut.of(incident, host_name=host.name).model_dump(mode="json")
    if alive is not None:  # known only once netconsole brought a line after the last heartbeat
        summary["kernel_alive"] = alive.model_dump(mode="json")
    payload = {
        "type": event,
        "event": event,
        "timestamp": now.isoformat(),
        "host": {"name": host.name, "status": host.status, "boot_id": host.current_boot_id},
        "incident": summary,
        **recent_evidence(session, host_id=host.id).model_dump(mode="json"),
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
