"""Everything the host timeline draws, in one response (``TimelineOut``): bucketed series,
kernel-event markers, vLLM phase bands, incident spans, matrix-run windows and the agent
guard's firings. All times are epoch seconds; lists are sorted by time; the UI ignores keys it
does not know.

All times are on the collector's time base: series, markers and phases carry the agent's clock,
moved by the host's measured offset when it is skewed (``collector.readback.timebase``;
``clock_offset_s`` says by how much); incident spans, matrix windows and guard firings are the
collector's clock already.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Host, KernelAction, KernelEventRow, Line, Severity, VllmPhase
from collector.readback import timebase
from collector.readback.downsample import SeriesOut, bucketed_samples, nice_step
from collector.readback.guard_events import GuardFiring, guard_firings
from collector.readback.windows import IncidentSpan, MatrixWindow, incident_spans, matrix_windows
from collector.schemas import AgentTime, OutModel, on_collector_clock

DEFAULT_SPAN_S = 3600.0
DEFAULT_POINTS = 1500
MAX_MARKERS = 2000
MAX_BANDS = 2000
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


class MarkerOut(OutModel):
    """A classified kernel event with its line; ``kind`` as in ``kernel_events`` (xid, sxid,
    nv_err, gsp, uvm, bus_off, aer, iommu, oops, soft_lockup, hung_task, rcu_stall, oom_kill,
    alloc_failure)."""

    ts: AgentTime
    kind: str
    text: str
    priority: int | None
    source: str
    line_id: int
    meaning: str | None
    vllm_phase: str | None
    code: str | None
    device: str | None
    severity: Severity
    action: KernelAction


class PhaseBand(OutModel):
    """A vLLM phase from its start until the next phase; ``end`` null for the current one."""

    start: AgentTime
    end: AgentTime | None
    phase: str
    label: str
    start_id: int


class TimelineOut(OutModel):
    """The host page's data for [since, until] at ``step`` seconds."""

    host: str
    since: float
    until: float
    step: int
    now: float
    # Seconds added to the agent's record times (0 unless its clock is skewed).
    clock_offset_s: float
    series: SeriesOut
    markers: list[MarkerOut]
    phases: list[PhaseBand]
    incidents: list[IncidentSpan]
    matrix: list[MatrixWindow]
    guard: list[GuardFiring]


def kernel_markers(
    session: Session, *, host_id: int, since: float, until: float, offset: float = 0.0
) -> list[MarkerOut]:
    """The host's classified kernel events (``kernel_events``) with their line, in [since,
    until] on the agent's clock; ``offset`` moves their times to the collector's."""
    clock = on_collector_clock(offset)
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
        MarkerOut.model_validate(
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
            },
            context=clock,
        )
        for event, text, priority, source in session.execute(query)
    ]


def phase_bands(
    session: Session, *, host_id: int, since: float, until: float, offset: float = 0.0
) -> list[PhaseBand]:
    """vLLM phase bands overlapping [since, until] (the agent's clock; ``offset`` moves them
    to the collector's): each phase lasts until the host's next phase (of the same start, or
    the next start's first); the current one has ``end`` null."""
    clock = on_collector_clock(offset)
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
            PhaseBand.model_validate(
                {
                    "start": phase.ts,
                    "end": end,
                    "phase": phase.phase,
                    "label": PHASE_LABELS.get(phase.phase, phase.phase.replace("_", " ")),
                    "start_id": phase.start_id,
                },
                context=clock,
            )
        )
    return bands


def host_timeline(
    session: Session,
    *,
    host: Host,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
    now: float,
) -> TimelineOut:
    """The host page's data for [since, until] (default: the last hour) at ``step`` seconds
    (default: a nice step giving ~1500 points)."""
    until = now if until is None else until
    since = until - DEFAULT_SPAN_S if since is None else since
    step = nice_step(until - since, DEFAULT_POINTS) if step is None else step
    offset = timebase.offset_s(host)
    # Markers and phases are looked up on the agent's clock, and moved back to ours.
    window = {"since": since, "until": until}
    agent = {"since": since - offset, "until": until - offset}
    return TimelineOut.model_validate(
        {
            "host": host.name,
            "since": since,
            "until": until,
            "step": step,
            "now": now,
            "clock_offset_s": offset,
            "series": bucketed_samples(
                session, host_id=host.id, step=step, offset=offset, **window
            ),
            "markers": kernel_markers(session, host_id=host.id, offset=offset, **agent),
            "phases": phase_bands(session, host_id=host.id, offset=offset, **agent),
            "incidents": incident_spans(session, host_id=host.id, **window),
            "matrix": matrix_windows(session, host_id=host.id, **window),
            "guard": guard_firings(session, host_id=host.id, since=since, until=until),
        }
    )
