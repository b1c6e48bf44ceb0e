"""Kernel events in vLLM's context: the phase vLLM was in and the nearest vLLM line.

vLLM lines from a followed log file carry the time the agent read them (a little after vLLM
wrote them, and one read stamps several lines alike), while kernel records carry the kernel's
own time. So a phase entered at most ``VLLM_LINE_LAG_S`` after an event counts as already in
force at the event (one phase step, no more) when it began closer to the event than the phase
before it: a GPU fault logged right at "Loading drafter model..." belongs to the drafter load.
Among lines sharing the nearest timestamp, the line that entered that phase is the context
shown. vLLM lines may also reach us after the kernel line they explain (another channel, a
polled file): ``recorrelate_around`` gives the events near newly stored vLLM lines another look.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import KernelEventRow, VllmPhase
from collector.vllm.store import vllm_lines

WINDOW_S = 2.0  # a kernel event's nearest vLLM line is at most this far away
VLLM_LINE_LAG_S = 0.5
# Kernel events up to this long after newly stored vLLM lines are correlated again.
LATE_VLLM_S = 60.0
MAX_RECORRELATE = 1000


class PhaseEntry(NamedTuple):
    ts: float
    phase: str
    line_id: int | None


def phase_at(event_ts: float, phases: Sequence[PhaseEntry]) -> PhaseEntry | None:
    """The phase in force at ``event_ts`` (``phases`` in time order), with the lag rule above."""
    i = bisect.bisect_right([p.ts for p in phases], event_ts)
    before = phases[i - 1] if i else None
    after = phases[i] if i < len(phases) else None
    if (
        after is not None
        and after.ts - event_ts <= VLLM_LINE_LAG_S
        and (before is None or after.ts - event_ts < event_ts - before.ts)
    ):
        return after
    return before


def nearest_line(
    event_ts: float, lines: Sequence[tuple[float, str]], window_s: float = WINDOW_S
) -> tuple[float, str] | None:
    """The (ts, text) nearest to ``event_ts`` within ±window_s; on a tie the earlier line wins
    (it is the one that can have caused the event)."""
    best: tuple[float, str] | None = None
    best_key: tuple[float, float] | None = None
    for ts, text in lines:
        gap = abs(ts - event_ts)
        if gap > window_s:
            continue
        key = (gap, ts)
        if best_key is None or key < best_key:
            best, best_key = (ts, text), key
    return best


def context_line(event_ts: float, entered: PhaseEntry | None, near: Sequence[Any]) -> Any:
    """The vLLM line shown with an event (``near``: rows with ``id``, ``ts``, ``text``).

    When the lag rule put the event in a phase entered just after it, the line that entered
    that phase, so that line and phase agree (a line read late can stand behind one read
    promptly before it). Otherwise the nearest line; on a tie, the one that entered the phase.
    """
    if entered is not None and entered.ts > event_ts and entered.line_id is not None:
        entering = next((r for r in near if r.id == entered.line_id), None)
        if entering is not None:
            return entering
    nearest = nearest_line(event_ts, [(r.ts, r.text) for r in near])
    if nearest is None:
        return None
    ties = [r for r in near if r.ts == nearest[0]]
    chosen = next((r for r in ties if entered and r.id == entered.line_id), None)
    return chosen or next(r for r in ties if r.text == nearest[1])


def correlate(session: Session, *, host_id: int, events: Sequence[Any]) -> None:
    """Set each event's vllm_phase and nearest vLLM line (within ±WINDOW_S) from storage.

    ``events``: stored ``KernelEventRow`` rows or events about to be stored; anything with
    ``ts`` and the ``vllm_*`` attributes.
    """
    if not events:
        return
    lo = min(e.ts for e in events)
    hi = max(e.ts for e in events)
    lines = session.execute(vllm_lines(host_id, since=lo - WINDOW_S, until=hi + WINDOW_S)).all()
    columns = (VllmPhase.ts, VllmPhase.phase, VllmPhase.line_id)
    rows = list(
        session.execute(
            select(*columns)
            .where(VllmPhase.host_id == host_id, VllmPhase.ts <= lo)
            .order_by(VllmPhase.ts.desc(), VllmPhase.id.desc())
            .limit(1)
        ).all()
    )
    rows += session.execute(
        select(*columns)
        .where(
            VllmPhase.host_id == host_id,
            VllmPhase.ts > lo,
            VllmPhase.ts <= hi + VLLM_LINE_LAG_S,
        )
        .order_by(VllmPhase.ts, VllmPhase.id)
    ).all()
    phases = [PhaseEntry(*row) for row in rows]
    line_ts = [row.ts for row in lines]
    for event in events:
        entered = phase_at(event.ts, phases)
        near = lines[
            bisect.bisect_left(line_ts, event.ts - WINDOW_S) : bisect.bisect_right(
                line_ts, event.ts + WINDOW_S
            )
        ]
        chosen = context_line(event.ts, entered, near)
        event.vllm_phase = entered.phase if entered else None
        event.vllm_line_id = chosen.id if chosen else None
        event.vllm_line_ts = chosen.ts if chosen else None
        event.vllm_line = chosen.text if chosen else None


def recorrelate_around(
    session: Session, *, host_id: int, stamps: Sequence[float], skip_ids: Collection[int] = ()
) -> None:
    """Kernel events stored before the vLLM lines at ``stamps`` arrived: correlate them again
    (``skip_ids``: events just correlated with those lines already)."""
    if not stamps:
        return
    lo = min(stamps) - WINDOW_S
    hi = max(stamps) + LATE_VLLM_S
    earlier = [
        e
        for e in session.scalars(
            select(KernelEventRow)
            .where(
                KernelEventRow.host_id == host_id, KernelEventRow.ts >= lo, KernelEventRow.ts <= hi
            )
            .order_by(KernelEventRow.ts)
            .limit(MAX_RECORRELATE)
        )
        if e.id not in skip_ids
    ]
    correlate(session, host_id=host_id, events=earlier)
