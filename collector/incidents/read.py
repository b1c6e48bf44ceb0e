"""Reading incidents back: filtered lists (``IncidentListItem``, each with its cause) and the
full detail (``IncidentDetail``: probes, snapshot, artifacts, deliveries, and the headline's
kernel events and vLLM start) shared by the JSON API and the pages."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.alerts.delivery import DeliveryOut
from collector.errors import NotFound
from collector.hosts.registry import find_boot_pk
from collector.incidents.headline import (
    IncidentCause,
    cause,
    vllm_start_before,
    window_kernel_events,
)
from collector.incidents.lifecycle import current_incident
from collector.incidents.payload import IncidentOut, KernelAlive, kernel_alive
from collector.kernel.read import KernelEventOut
from collector.kernel.records import LogEventOut
from collector.links import incident_url
from collector.models import (
    Artifact,
    Delivery,
    Host,
    Incident,
    IncidentKind,
    IncidentSnapshot,
    IncidentState,
    Line,
    WebhookTarget,
)
from collector.readback.guard_events import GuardFiring, guard_firings
from collector.readback.series import LineOut, lines_out
from collector.readback.timeline import MarkerOut, PhaseBand, kernel_markers, phase_bands
from collector.readback.windows import MatrixWindow, matrix_windows
from collector.schemas import Epoch, OutModel
from collector.timeutil import from_epoch, to_epoch
from collector.vllm.status import VllmStartOut

WINDOW_AFTER_S = 5.0
LATE_EVIDENCE_MAX_LINES = 5000


class IncidentView(IncidentOut):
    """An incident as the pages list it: with the host's ``simulated`` flag, the incident
    page's ``url`` and the span drawn, ``start`` (last heartbeat, else when the host went late)
    to ``end`` (returned, else resolved; null while open)."""

    simulated: bool
    url: str
    start: float
    end: float | None


class IncidentListItem(IncidentView):
    """An incident on the freezes page: with its ``cause``, null when the kernel said nothing
    worth naming."""

    cause: IncidentCause | None


class TimeWindow(OutModel):
    since: float
    until: float


class SnapshotOut(OutModel):
    """The last-gasp evidence as stored when the incident opened: ``samples`` and ``lines`` in
    the shapes of ``SampleOut`` and ``LineOut`` at that time, ``context`` the vLLM state."""

    taken_at: Epoch
    window_start: float | None
    window_end: float | None
    samples: list[dict[str, Any]]
    lines: list[dict[str, Any]]
    context: dict[str, Any]


class ArtifactOut(OutModel):
    """One post-mortem command's outcome."""

    name: str
    argv: list[str]
    exit_status: int | None
    duration_s: float | None
    size: int
    stderr: str
    truncated: bool
    error: str | None
    attempts: int
    collected_at: float
    url: str
    # The events found in a kernel log (pstore files, the previous boot's kernel journal).
    kernel_events: list[LogEventOut]

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactOut:
        """``size`` is the stdout's, served at ``url`` (``?download=1`` as an attachment);
        ``stderr`` is the last 2000 characters."""
        return cls.model_validate(
            {
                "name": artifact.name,
                "argv": artifact.argv,
                "exit_status": artifact.exit_status,
                "duration_s": artifact.duration_s,
                "size": len(artifact.stdout or b""),
                "stderr": (artifact.stderr or b"").decode(errors="replace")[-2000:],
                "truncated": artifact.truncated,
                "error": artifact.error,
                "attempts": artifact.attempts,
                "collected_at": artifact.collected_at.timestamp(),
                "url": artifact_url(artifact.incident_id, artifact.name),
                "kernel_events": list(artifact.kernel_events or []),
            }
        )


class IncidentDetail(IncidentView):
    """Everything about one incident. ``window`` is the snapshot's span on the agent's clock
    (+5 s); ``markers``, ``phases``, ``matrix`` and ``guard`` are the host's kernel events, vLLM
    phase bands, matrix-run windows and guard firings in it; ``late_evidence`` the lines of the
    incident's boot that arrived after it opened. For the headline: ``kernel_events``, the
    host's classified kernel events from the window's start to the end of the silence (newest
    first), and ``vllm_start``, its last vLLM server start before the loss with its plan."""

    window: TimeWindow
    kernel_events: list[KernelEventOut]
    vllm_start: VllmStartOut | None
    markers: list[MarkerOut]
    phases: list[PhaseBand]
    matrix: list[MatrixWindow]
    guard: list[GuardFiring]
    snapshot: SnapshotOut | None
    kernel_alive: KernelAlive | None
    late_evidence: list[LineOut]
    artifacts: list[ArtifactOut]
    deliveries: list[DeliveryOut]


class OpenIncidentBrief(OutModel):
    """A host's incident not yet resolved; ``since`` is its last heartbeat."""

    id: int
    kind: IncidentKind
    state: IncidentState
    since: float
    url: str


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
) -> list[IncidentListItem]:
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
        IncidentListItem.model_validate(
            {
                **dict(incident_view(incident, host)),
                "cause": cause(session, incident=incident, window_s=window_s, now=now),
            }
        )
        for incident, host in rows
    ]


def incident_view(incident: Incident, host: Host) -> IncidentView:
    return IncidentView.model_validate(
        {
            **dict(IncidentOut.of(incident, host_name=host.name)),
            "simulated": host.simulated,
            "url": incident_url(incident.id),
            "start": to_epoch(incident.silence_start),
            "end": to_epoch(incident.silence_end),
        }
    )


def get_incident(session: Session, *, incident_id: int) -> tuple[Incident, Host]:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise NotFound(f"no incident {incident_id}")
    host = session.get(Host, incident.host_id)
    assert host is not None
    return incident, host


def incident_detail(session: Session, *, incident_id: int) -> IncidentDetail:
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
    end = float(max((s["ts"] for s in samples), default=None) or view.start or view.opened_at)
    window_s = 120.0
    if (
        snapshot is not None
        and snapshot.window_end is not None
        and snapshot.window_start is not None
    ):
        window_s = snapshot.window_end - snapshot.window_start
    since, until = end - window_s, end + WINDOW_AFTER_S
    silence_end = to_epoch(incident.silence_end)
    return IncidentDetail.model_validate(
        {
            **dict(view),
            "window": {"since": since, "until": until},
            "kernel_events": window_kernel_events(
                session, host_id=host.id, since=since, until=silence_end
            ),
            "vllm_start": vllm_start_before(session, host_id=host.id, ts=until),
            "markers": kernel_markers(session, host_id=host.id, since=since, until=until),
            "phases": phase_bands(session, host_id=host.id, since=since, until=until),
            "matrix": matrix_windows(session, host_id=host.id, since=since, until=until),
            "guard": guard_firings(session, host_id=host.id, since=since, until=until),
            "snapshot": snapshot,
            "kernel_alive": kernel_alive(session, incident=incident),
            "late_evidence": late_evidence(session, incident=incident),
            "artifacts": [ArtifactOut.of(a) for a in artifacts],
            "deliveries": [DeliveryOut.of(d, url) for d, url in deliveries],
        }
    )


def artifact_url(incident_id: int, name: str) -> str:
    return f"/api/v1/incidents/{incident_id}/artifacts/{quote(name)}"


def late_evidence(session: Session, *, incident: Incident) -> list[LineOut]:
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
    return lines_out(rows)


def open_incident_brief(session: Session, *, host_id: int) -> OpenIncidentBrief | None:
    """The host's newest incident not yet resolved."""
    incident = current_incident(session, host_id=host_id)
    if incident is None:
        return None
    return OpenIncidentBrief.model_validate(
        {
            "id": incident.id,
            "kind": incident.kind,
            "state": incident.state,
            "since": to_epoch(incident.silence_start),
            "url": incident_url(incident.id),
        }
    )


def get_artifact(session: Session, *, incident_id: int, name: str) -> Artifact:
    artifact = session.scalar(
        select(Artifact).where(Artifact.incident_id == incident_id, Artifact.name == name)
    )
    if artifact is None:
        raise NotFound(f"incident {incident_id} has no artifact {name!r}")
    return artifact
