"""Reading incidents back: filtered lists and the full detail (probes, snapshot, artifacts,
deliveries) shared by the JSON API and the pages.

Beyond :func:`collector.incidents.payload.incident_dict` both carry ``simulated`` (the host's
flag), ``url`` (the incident page), ``start`` (last heartbeat, else when it went late) and
``end`` (returned, else resolved; null while open), the span the pages draw. The detail adds
``window`` ``{"since", "until"}`` (the snapshot's 120 s on the agent's clock, +5 s), the host's
classified kernel events, vLLM phase bands, matrix-run windows and guard firings in it as
``markers``, ``phases``, ``matrix`` and ``guard`` (shapes of :mod:`collector.readback.timeline`)
and each artifact's ``url`` (``?download=1`` serves it as an attachment).

For the incident page's headline the detail also has ``kernel_events`` (the host's classified
kernel events from the window's start to the end of the silence, newest first, shape of
:func:`collector.kernel.read.kernel_event_dict`) and ``vllm_start`` (the host's last vLLM server
start before the loss with its startup plan, :func:`collector.vllm.status.start_dict`, or null).
The list's items carry ``cause``: the first kernel event from the snapshot window before the
silence to its end (``{"kind", "ts", "meaning", "xid", "nv_err", "severity", "action",
"line_id", "text"}``), or null when the kernel said nothing worth naming.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import EVENT_KINDS
from collector.alerts.delivery import delivery_dict
from collector.errors import NotFound
from collector.hosts.registry import find_boot_pk
from collector.incidents.lifecycle import current_incident
from collector.incidents.message import first_kernel_event
from collector.incidents.payload import incident_dict, kernel_alive
from collector.incidents.postmortem import artifact_dict
from collector.kernel.read import list_events
from collector.links import incident_url
from collector.models import (
    Artifact,
    Delivery,
    Host,
    Incident,
    IncidentSnapshot,
    Line,
    VllmPhase,
    VllmStart,
    WebhookTarget,
)
from collector.readback.guard_events import guard_firings
from collector.readback.series import line_dict
from collector.readback.timeline import kernel_markers, matrix_windows, phase_bands
from collector.timeutil import from_epoch, to_epoch
from collector.vllm.status import start_dict

WINDOW_AFTER_S = 5.0
LATE_EVIDENCE_MAX_LINES = 5000
HEADLINE_MAX_EVENTS = 100
CAUSE_KEYS = ("kind", "ts", "meaning", "xid", "nv_err", "severity", "action")


def list_incidents(
    session: Session,
    *,
    host: str | None = None,
    kind: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
    window_s: float,
    now: datetime,
) -> list[dict[str, Any]]:
    """Newest first; ``since``/``until`` (epoch s) bound the opening time; ``window_s`` is how
    far before the silence the ``cause`` is looked for."""
    query = select(Incident, Host).join(Host, Host.id == Incident.host_id)
    if host is not None:
        query = query.where(Host.name == host)
    if kind is not None:
        query = query.where(Incident.kind == kind)
    if since is not None:
        query = query.where(Incident.opened_at >= from_epoch(since))
    if until is not None:
        query = query.where(Incident.opened_at <= from_epoch(until))
    rows = session.execute(query.order_by(Incident.opened_at.desc()).limit(min(limit, 5000)))
    return [
        {
            **incident_view(incident, host),
            "cause": cause(session, incident=incident, window_s=window_s, now=now),
        }
        for incident, host in rows
    ]


def cause(
    session: Session, *, incident: Incident, window_s: float, now: datetime
) -> dict[str, Any] | None:
    """The first kernel event around the silence, briefly (see the module docstring)."""
    event = first_kernel_event(session, incident=incident, window_s=window_s, now=now)
    if event is None:
        return None
    line = event.get("line") or {}
    return {
        **{key: event.get(key) for key in CAUSE_KEYS},
        "line_id": line.get("id"),
        "text": line.get("text"),
    }


def vllm_start_before(session: Session, *, host_id: int, ts: float) -> dict[str, Any] | None:
    """The host's newest vLLM server start at or before ``ts``, with its plan, or None."""
    start = session.scalars(
        select(VllmStart)
        .where(VllmStart.host_id == host_id, VllmStart.started_ts <= ts)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    ).first()
    if start is None:
        return None
    phases = session.scalars(select(VllmPhase).where(VllmPhase.start_id == start.id))
    return start_dict(start, list(phases))


def incident_view(incident: Incident, host: Host) -> dict[str, Any]:
    """:func:`incident_dict` plus what the pages draw with (see the module docstring)."""
    return {
        **incident_dict(incident, host_name=host.name),
        "simulated": host.simulated,
        "url": incident_url(incident.id),
        "start": to_epoch(incident.silence_start),
        "end": to_epoch(incident.silence_end),
    }


def get_incident(session: Session, *, incident_id: int) -> tuple[Incident, Host]:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise NotFound(f"no incident {incident_id}")
    host = session.get(Host, incident.host_id)
    assert host is not None
    return incident, host


def incident_detail(session: Session, *, incident_id: int) -> dict[str, Any]:
    incident, host = get_incident(session, incident_id=incident_id)
    snapshot = session.get(IncidentSnapshot, incident.id)
    artifacts = session.scalars(
        select(Artifact).where(Artifact.incident_id == incident.id).order_by(Artifact.name)
    )
    deliveries = session.execute(
        select(Delivery, WebhookTarget.url)
        .join(WebhookTarget, WebhookTarget.id == Delivery.target_id)
        .where(Delivery.incident_id == incident.id)
        .order_by(Delivery.id)
    )
    view = incident_view(incident, host)
    samples = snapshot.samples if snapshot is not None else []
    # The snapshot's own clock (the agent's) when it has samples, else the collector's.
    end = max((s["ts"] for s in samples), default=None) or view["start"] or view["opened_at"]
    window_s = snapshot.window_end - snapshot.window_start if snapshot is not None else 120.0
    window = {"since": end - window_s, "until": end + WINDOW_AFTER_S}
    events = list_events(
        session,
        host_id=host.id,
        kinds=list(EVENT_KINDS),
        since=window["since"],
        until=to_epoch(incident.silence_end),
        limit=HEADLINE_MAX_EVENTS,
    )
    return {
        **view,
        "window": window,
        "kernel_events": events,
        "vllm_start": vllm_start_before(session, host_id=host.id, ts=window["until"]),
        "markers": kernel_markers(session, host_id=host.id, **window),
        "phases": phase_bands(session, host_id=host.id, **window),
        "matrix": matrix_windows(session, host_id=host.id, **window),
        "guard": guard_firings(session, host_id=host.id, **window),
        "snapshot": None
        if snapshot is None
        else {
            "taken_at": snapshot.taken_at.timestamp(),
            "window_start": snapshot.window_start,
            "window_end": snapshot.window_end,
            "samples": snapshot.samples,
            "lines": snapshot.lines,
            "context": snapshot.context,
        },
        "kernel_alive": kernel_alive(session, incident=incident),
        "late_evidence": late_evidence(session, incident=incident),
        "artifacts": [
            {**artifact_dict(a), "url": artifact_url(incident.id, a.name)} for a in artifacts
        ],
        "deliveries": [delivery_dict(d, url) for d, url in deliveries],
    }


def artifact_url(incident_id: int, name: str) -> str:
    return f"/api/v1/incidents/{incident_id}/artifacts/{quote(name)}"


def late_evidence(session: Session, *, incident: Incident) -> list[dict[str, Any]]:
    """Lines of the incident's boot that reached us after it opened, oldest first.

    What the host kept of a frozen boot and shipped after the reboot (the agent's catch-up
    of the previous boot's kernel journal and pstore files, spooled batches) lands here
    without any SSH access. When the host came back on the same boot, only lines from
    inside the silence count (``ts`` up to the return), not everything that boot said later.
    """
    boot = find_boot_pk(session, host_id=incident.host_id, boot_id=incident.boot_id)
    if boot is None:
        return []
    # boot_pk leads the (boot_pk, seq) unique index: no scan of the host's other boots.
    query = select(Line).where(
        Line.boot_pk == boot, Line.received_at > to_epoch(incident.opened_at)
    )
    returned = to_epoch(incident.returned_at)
    if returned is not None and incident.return_boot_id == incident.boot_id:
        query = query.where(Line.ts <= returned)
    rows = session.scalars(query.order_by(Line.ts, Line.id).limit(LATE_EVIDENCE_MAX_LINES))
    return [line_dict(x) for x in rows]


def open_incident_brief(session: Session, *, host_id: int) -> dict[str, Any] | None:
    """The host's newest incident not yet resolved; ``since`` is its last heartbeat."""
    incident = current_incident(session, host_id=host_id)
    if incident is None:
        return None
    return {
        "id": incident.id,
        "kind": incident.kind,
        "state": incident.state,
        "since": to_epoch(incident.silence_start),
        "url": incident_url(incident.id),
    }


def get_artifact(session: Session, *, incident_id: int, name: str) -> Artifact:
    artifact = session.scalar(
        select(Artifact).where(Artifact.incident_id == incident_id, Artifact.name == name)
    )
    if artifact is None:
        raise NotFound(f"incident {incident_id} has no artifact {name!r}")
    return artifact
