"""What a campaign reads about its host: status, boot and incidents.

Queries only: liveness decides the host's status and incidents open in their lifecycle; the
runner watches them (and notes on an incident's snapshot which matrix unit it cut short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import SILENT_KINDS, Boot, Host, Incident, IncidentSnapshot
from collector.timeutil import from_epoch, to_epoch


@dataclass(frozen=True)
class HostView:
    status: str
    since: float  # when the host entered its status (epoch s)
    boot_id: str | None
    boot_seen: float | None  # when the current boot was first heard of
    heard_from: bool  # the agent ever sent a batch (without it, no freeze is ever seen)


def host_view(session: Session, *, host_id: int) -> HostView:
    host = session.get(Host, host_id, populate_existing=True)
    if host is None:
        raise LookupError(f"host {host_id} was deleted")
    seen = session.scalar(
        select(Boot.first_seen_at).where(
            Boot.host_id == host_id, Boot.boot_id == host.current_boot_id
        )
    )
    return HostView(
        status=host.status,
        since=to_epoch(host.status_since) or 0.0,
        boot_id=host.current_boot_id,
        boot_seen=to_epoch(seen),
        heard_from=host.last_seen_at is not None,
    )


def brief(incident: Incident) -> dict[str, Any]:
    """What a step and the report keep of an incident."""
    return {
        "id": incident.id,
        "kind": incident.kind,
        "opened_at": to_epoch(incident.opened_at),
        "silent_since": to_epoch(incident.silence_start),
    }


def incidents_since(session: Session, *, host_id: int, since: float) -> list[Incident]:
    """The host's incidents opened at or after ``since``, oldest first."""
    return list(
        session.scalars(
            select(Incident)
            .where(Incident.host_id == host_id, Incident.opened_at >= from_epoch(since))
            .order_by(Incident.id)
        )
    )


def new_freeze(
    session: Session, *, host_id: int, since: float, handled: set[int]
) -> Incident | None:
    """The first incident since ``since`` that is a freeze (not a planned or paused silence)
    and not yet handled."""
    for incident in incidents_since(session, host_id=host_id, since=since):
        if incident.kind not in SILENT_KINDS and incident.id not in handled:
            return incident
    return None


def note_matrix_unit(session: Session, *, incident_id: int, unit: dict[str, Any]) -> None:
    """Record on the incident's snapshot the matrix run/profile/step the host was in."""
    snapshot = session.get(IncidentSnapshot, incident_id)
    if snapshot is not None:
        snapshot.context = {**(snapshot.context or {}), "matrix_run": unit}
