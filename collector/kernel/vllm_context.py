"""Stored kernel events in vLLM's context: the phase vLLM was in and the nearest vLLM line.

vLLM lines from a followed log file carry the time the agent read them (a little after vLLM
wrote them, and one read stamps several lines alike), while kernel records carry the kernel's
own time. So a phase entered at most ``VLLM_LINE_LAG_S`` after an event counts as already in
force at the event (one phase step, no more) when it began closer to the event than the phase
before it: a GPU fault logged right at "Loading drafter model..." belongs to the drafter load.
Among lines sharing the nearest timestamp, the line that entered that phase is the context
shown.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import VllmPhase
from collector.services.correlate import nearest_vllm_context
from collector.vllm.store import vllm_lines

WINDOW_S = 2.0  # a kernel event's nearest vLLM line is at most this far away
VLLM_LINE_LAG_S = 0.5


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
    phases = session.execute(
        select(*columns)
        .where(VllmPhase.host_id == host_id, VllmPhase.ts <= lo)
        .order_by(VllmPhase.ts.desc(), VllmPhase.id.desc())
        .limit(1)
    ).all()
    phases += session.execute(
        select(*columns)
        .where(
            VllmPhase.host_id == host_id,
            VllmPhase.ts > lo,
            VllmPhase.ts <= hi + VLLM_LINE_LAG_S,
        )
        .order_by(VllmPhase.ts, VllmPhase.id)
    ).all()
    phase_ts = [p.ts for p in phases]
    line_ts = [row.ts for row in lines]
    for event in events:
        i = bisect.bisect_right(phase_ts, event.ts)
        before = phases[i - 1] if i else None
        after = phases[i] if i < len(phases) else None
        # The next phase counts when it began within the lag AND closer to the event than the
        # current one did: a fault right at "Loading drafter model..." read a moment late
        # belongs to the drafter, a fault just after it does not belong to profiling.
        if (
            after is not None
            and after.ts - event.ts <= VLLM_LINE_LAG_S
            and (before is None or after.ts - event.ts < event.ts - before.ts)
        ):
            entered = after
        else:
            entered = before
        near = lines[
            bisect.bisect_left(line_ts, event.ts - WINDOW_S) : bisect.bisect_right(
                line_ts, event.ts + WINDOW_S
            )
        ]
        _, nearest = nearest_vllm_context(event.ts, [(r.ts, r.text) for r in near], [], WINDOW_S)
        chosen = None
        if nearest is not None:
            ties = [r for r in near if r.ts == nearest[0]]
            chosen = next((r for r in ties if entered and r.id == entered.line_id), None)
            chosen = chosen or next(r for r in ties if r.text == nearest[1])
        event.vllm_phase = entered.phase if entered else None
        event.vllm_line_id = chosen.id if chosen else None
        event.vllm_line_ts = chosen.ts if chosen else None
        event.vllm_line = chosen.text if chosen else None
