"""Put a kernel event in vLLM's context: the phase it happened in and the nearest vLLM line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PhaseEntry = Mapping[str, Any] | tuple[float, str]


def _phase_of(entry: PhaseEntry) -> tuple[float | None, str]:
    if isinstance(entry, Mapping):
        return entry.get("ts"), str(entry.get("phase"))
    return entry[0], entry[1]


def nearest_vllm_context(
    event_ts: float,
    vllm_lines: Sequence[tuple[float, str]],
    phases: Sequence[PhaseEntry],
    window_s: float = 2.0,
) -> tuple[str | None, tuple[float, str] | None]:
    """(phase vLLM was in at event_ts, nearest (ts, line) within ±window_s or None).

    phases: `{"phase", "ts"}` dicts (as in StartupPlan.phases) or `(ts, phase)` tuples, any order.
    On a tie the earlier line wins: it is the one that can have caused the event.
    """
    phase: str | None = None
    phase_ts: float | None = None
    for entry in phases:
        ts, name = _phase_of(entry)
        if ts is not None and ts <= event_ts and (phase_ts is None or ts >= phase_ts):
            phase, phase_ts = name, ts
    best: tuple[float, str] | None = None
    best_key: tuple[float, float] | None = None
    for ts, text in vllm_lines:
        gap = abs(ts - event_ts)
        if gap > window_s:
            continue
        key = (gap, ts)
        if best_key is None or key < best_key:
            best, best_key = (ts, text), key
    return phase, best
