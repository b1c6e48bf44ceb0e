"""Everything the host timeline draws, in one response: series, markers, bands and spans.

Shapes (all times epoch seconds; lists sorted by time; the UI ignores unknown keys):

- ``series``: see :func:`collector.readback.downsample.bucketed_samples`.
- ``markers``: classified kernel events ``{"ts", "kind", "text", "priority", "source",
  "line_id", "meaning", "vllm_phase", "code", "device", "severity", "action"}``; ``kind`` as
  in ``kernel_events`` (xid, sxid, nv_err, gsp, uvm, bus_off, oops, soft_lockup, hung_task,
  rcu_stall, oom_kill, alloc_failure); ``action``: none, restart_app, reset_gpu, reboot,
  inspect_hardware.
- ``phases``: vLLM phase bands ``{"start", "end" | null, "phase", "label", "start_id"}``.
- ``incidents``: ``{"id", "start", "end" | null, "kind", "state", "resolution" | null, "url"}``;
  start is the last heartbeat (else when the host went late), end when heartbeats returned
  (else when resolved), null while the host is still silent. Collector clock.
- ``matrix``: matrix-run windows ``{"run_id", "run", "profile", "repetition", "kind":
  startup|workload, "workload" | null, "start", "end" | null, "status", "url"}``; status is the
  step outcome (ok/failed/timeout/cancelled), ``running``, or the run's end status.
- ``guard``: the agent guard's firings and dry-run matches (:mod:`collector.readback.guard_events`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from collector.links import incident_url, matrix_run_url
from collector.models import (
    ACTIVE_RUNS,
    Host,
    Incident,
    KernelEventRow,
    Line,
    MatrixRun,
    MatrixStep,
    VllmPhase,
)
from collector.readback.downsample import bucketed_samples, nice_step
from collector.readback.guard_events import guard_firings
from collector.timeutil import from_epoch, to_epoch

DEFAULT_SPAN_S = 3600.0
DEFAULT_POINTS = 1500
MAX_MARKERS = 2000
MAX_BANDS = 2000
MAX_WINDOWS = 1000
# Phases after which the server is not running: their band is a tick at their moment.
TERMINAL_PHASES = ("stopped", "failed")
PHASE_LABELS = {
    "starting": "starting",
    "loading_weights": "loading weights",
    "loading_drafter": "loading drafter",
    "profiling": "profiling memory",
    "capturing_cuda_graphs": "capturing CUDA graphs",
    "serving": "serving",
    "stopped": "stopped",
    "failed": "failed",
    "crashed": "crashed",
}


def kernel_markers(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    """The host's classified kernel events (``kernel_events``), with their line."""
    query = (
        select(KernelEventRow, Line.text, Line.priority, Line.source)
        .join(Line, Line.id == KernelEventRow.line_id)
        .where(
            KernelEventRow.host_id == host_id,
            KernelEventRow.ts >= since,
            KernelEventRow.ts <= until,
        )
        .order_by(KernelEventRow.ts, KernelEventRow.id)
        .limit(MAX_MARKERS)
    )
    return [
        {
            "ts": event.ts,
            "kind": event.kind,
            "text": text,
            "priority": priority,
            "source": source,
            "line_id": event.line_id,
            "meaning": event.meaning,
            "vllm_phase": event.vllm_phase,
            "code": event.code,
            "device": event.device,
            "severity": event.severity,
            "action": event.action,
        }
        for event, text, priority, source in session.execute(query)
    ]


def phase_bands(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    """vLLM phase bands overlapping [since, until]: each phase lasts until the host's next phase
    (of the same start, or the next start's first); the current one has ``end`` null."""
    where = VllmPhase.host_id == host_id
    order = (VllmPhase.ts, VllmPhase.id)
    before = session.scalars(
        select(VllmPhase).where(where, VllmPhase.ts < since).order_by(*(c.desc() for c in order))
    ).first()
    inside = session.scalars(
        select(VllmPhase)
        .where(where, VllmPhase.ts >= since, VllmPhase.ts <= until)
        .order_by(*order)
        .limit(MAX_BANDS)
    ).all()
    after = session.scalars(
        select(VllmPhase).where(where, VllmPhase.ts > until).order_by(*order)
    ).first()
    rows = [p for p in (before, *inside, after) if p is not None]
    bands = []
    for phase, following in zip(rows, [*rows[1:], None], strict=False):
        if phase is after:
            break
        if phase.phase in TERMINAL_PHASES:
            end: float | None = phase.ts
        else:
            end = following.ts if following is not None else None
        if end is not None and end < since:
            continue
        bands.append(
            {
                "start": phase.ts,
                "end": end,
                "phase": phase.phase,
                "label": PHASE_LABELS.get(phase.phase, phase.phase.replace("_", " ")),
                "start_id": phase.start_id,
            }
        )
    return bands


def incident_spans(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
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
        {
            "id": incident.id,
            "start": to_epoch(incident.silence_start),
            "end": to_epoch(incident.silence_end),
            "kind": incident.kind,
            "state": incident.state,
            "resolution": incident.resolution,
            "url": incident_url(incident.id),
        }
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
) -> list[dict[str, Any]]:
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
    windows.sort(key=lambda w: (w["start"], w["kind"] != "startup"))
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
) -> dict[str, Any]:
    return {
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


def host_timeline(
    session: Session,
    *,
    host: Host,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
    now: float,
) -> dict[str, Any]:
    """The host page's data for [since, until] (default: the last hour) at ``step`` seconds
    (default: a nice step giving ~1500 points)."""
    until = now if until is None else until
    since = until - DEFAULT_SPAN_S if since is None else since
    step = nice_step(until - since, DEFAULT_POINTS) if step is None else step
    window = {"host_id": host.id, "since": since, "until": until}
    return {
        "host": host.name,
        "since": since,
        "until": until,
        "step": step,
        "now": now,
        "series": bucketed_samples(session, step=step, **window),
        "markers": kernel_markers(session, **window),
        "phases": phase_bands(session, **window),
        "incidents": incident_spans(session, **window),
        "matrix": matrix_windows(session, **window),
        "guard": guard_firings(session, **window),
    }
