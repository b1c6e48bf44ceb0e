"""The spans a timeline shades: a host's incidents (silence to return) and its matrix-run
windows (each profile's startup, each workload step). Times are epoch seconds."""

from __future__ import annotations

from typing import Literal

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from collector.links import incident_url, matrix_run_url
from collector.models import (
    ACTIVE_RUNS,
    Incident,
    IncidentKind,
    IncidentState,
    MatrixRun,
    MatrixStep,
    Resolution,
)
from collector.schemas import OutModel
from collector.timeutil import from_epoch, to_epoch

MAX_WINDOWS = 1000


class IncidentSpan(OutModel):
    """An incident from its last heartbeat (else when the host went late) to when heartbeats
    returned (else when resolved); ``end`` null while the host is still silent."""

    id: int
    start: float
    end: float | None
    kind: IncidentKind
    state: IncidentState
    resolution: Resolution | None
    url: str


class MatrixWindow(OutModel):
    """A matrix-run window; ``status`` is the step outcome (ok/failed/timeout/cancelled),
    ``running``, or the run's end status."""

    run_id: int
    run: str
    profile: str
    repetition: int
    kind: Literal["startup", "workload"]
    workload: str | None
    start: float
    end: float | None
    status: str
    url: str


def incident_spans(
    session: Session, *, host_id: int, since: float, until: float
) -> list[IncidentSpan]:
    """The host's incidents overlapping [since, until], from the last heartbeat to the return."""
    start = func.coalesce(Incident.last_heartbeat_at, Incident.late_at)
    end = func.coalesce(Incident.returned_at, Incident.resolved_at)
    query = (
        select(Incident)
        .where(
            Incident.host_id == host_id,
            start <= from_epoch(until),
            or_(end.is_(None), end >= from_epoch(since)),
        )
        .order_by(start, Incident.id)
        .limit(MAX_WINDOWS)
    )
    return [
        IncidentSpan.model_validate(
            {
                "id": incident.id,
                "start": to_epoch(incident.silence_start),
                "end": to_epoch(incident.silence_end),
                "kind": incident.kind,
                "state": incident.state,
                "resolution": incident.resolution,
                "url": incident_url(incident.id),
            }
        )
        for incident in session.scalars(query)
    ]


def _window_status(step: MatrixStep | None, run: MatrixRun) -> tuple[float | None, str]:
    """(end, status) of a step; a step left open by a run that ended ends with the run."""
    if step is not None and step.ended_at is not None:
        return step.ended_at, step.outcome or "ok"
    if run.status in ACTIVE_RUNS:
        return None, "running"
    return to_epoch(run.ended_at), run.status


def matrix_windows(
    session: Session, *, host_id: int, since: float, until: float
) -> list[MatrixWindow]:
    """Matrix-run windows on the host overlapping [since, until]: each profile's startup (server
    start until /health answered) and each workload step, sorted by start."""
    query = (
        select(MatrixStep, MatrixRun)
        .join(MatrixRun, MatrixRun.id == MatrixStep.run_id)
        .where(
            MatrixRun.host_id == host_id,
            MatrixStep.kind.in_(("start", "health", "workload")),
            MatrixStep.started_at <= until,
            or_(MatrixStep.ended_at.is_(None), MatrixStep.ended_at >= since),
        )
        .order_by(MatrixStep.started_at, MatrixStep.id)
        .limit(MAX_WINDOWS)
    )
    rows = session.execute(query).all()
    # A startup seen only through its health step still starts at its start step.
    keys = {(s.run_id, s.profile, s.repetition) for s, _ in rows if s.kind in ("start", "health")}
    startup: dict[tuple[int, str, int], dict[str, MatrixStep]] = {k: {} for k in keys}
    if keys:
        for step in session.scalars(
            select(MatrixStep).where(
                MatrixStep.run_id.in_({k[0] for k in keys}),
                MatrixStep.kind.in_(("start", "health")),
            )
        ):
            key = (step.run_id, step.profile, step.repetition)
            if key in startup:
                startup[key].setdefault(step.kind, step)
    runs = {run.id: run for _, run in rows}
    windows = []
    for key, steps in startup.items():
        run, start, health = runs[key[0]], steps.get("start"), steps.get("health")
        first = start or health
        assert first is not None
        if health is not None:
            end, status = _window_status(health, run)
        elif start is not None and start.ended_at is not None and start.outcome != "ok":
            end, status = start.ended_at, start.outcome or "failed"
        else:
            end, status = _window_status(None, run)
        windows.append(_window(run, key[1], key[2], "startup", None, first.started_at, end, status))
    for step, run in rows:
        if step.kind == "workload":
            end, status = _window_status(step, run)
            windows.append(
                _window(run, step.profile, step.repetition, "workload", step.name,
                        step.started_at, end, status)
            )  # fmt: skip
    windows.sort(key=lambda w: (w.start, w.kind != "startup"))
    return windows


def _window(
    run: MatrixRun,
    profile: str,
    repetition: int,
    kind: str,
    workload: str | None,
    start: float,
    end: float | None,
    status: str,
) -> MatrixWindow:
    return MatrixWindow.model_validate(
        {
            "run_id": run.id,
            "run": run.name,
            "profile": profile,
            "repetition": repetition,
            "kind": kind,
            "workload": workload,
            "start": start,
            "end": end,
            "status": status,
            "url": matrix_run_url(run.id),
        }
    )
