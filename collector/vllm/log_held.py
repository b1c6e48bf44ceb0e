"""Hang signals held until a capture shows what its server was doing when it printed them.

The shared-memory line and Ray's ``GetTimeoutError`` are no hang while a start is under way
(``log_hangs.quiet_while_starting``). Seen before the capture showed any start, the phase is
unknown: the line is held, not reported. The first start settles it. Opening in the middle of
starting (``log_formats.UNDER_WAY``: weights loaded, compile, profile, capture, drafter, the
init total) it says the workers were still starting when the line was printed: the held lines
are dropped (noonghunna/club-3090#138, vllm#32105: the line, then workers still compiling).
Opening on a start's first lines (version, args, the engine's init line, the start of the
weights' load), on serving, stats, a crash or a failure, or on a signal no phase quiets, they
are released as hang signals, each with its own line and time. So they are when no start
comes: at the input's end (``finish``), or live after ``HOLD_LINES`` lines or ``HOLD_S``
seconds of log time (the shared-memory line repeats each minute while an engine hangs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from collector.vllm.log_facts import VllmFact
from collector.vllm.log_hangs import quiet_while_starting

HOLD_LINES = 200
HOLD_S = 300.0


@dataclass
class Held:
    """One held signal: its fact's data and where its line was."""

    data: dict[str, Any]
    ts: float | None
    line_no: int | None
    ref: int | None


class HeldSignals:
    """The signals held so far, and the line count and time the first was held at."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self._held = [Held(**h) for h in state.get("signals", [])]
        self._since_lines: int = int(state.get("lines", 0))
        self._since_ts: float | None = state.get("ts")

    def __bool__(self) -> bool:
        return bool(self._held)

    def state(self) -> dict[str, Any]:
        """As JSON, for the parser's snapshot."""
        signals = [asdict(h) for h in self._held]
        return {"signals": signals, "lines": self._since_lines, "ts": self._since_ts}

    def admit(self, fact: VllmFact, msg: str, lines: int, started: bool) -> list[VllmFact]:
        """A hang signal's fact (``msg`` its message, ``lines`` the parser's line count at it,
        ``started`` whether the capture showed a start): held, or reported after the held ones
        (a signal no phase quiets says the engine was stuck: they were part of it)."""
        if started or not quiet_while_starting(msg):
            return [*self.release(fact.plan_index), fact]
        if not self._held:
            self._since_lines, self._since_ts = lines, fact.ts
        self._held.append(Held(fact.data, fact.ts, fact.line_no, fact.ref))
        return []

    def due(self, lines: int, ts: float | None) -> bool:
        """No start came within ``HOLD_LINES`` lines or ``HOLD_S`` seconds of the first."""
        if not self._held:
            return False
        if lines - self._since_lines >= HOLD_LINES:
            return True
        return ts is not None and self._since_ts is not None and ts - self._since_ts >= HOLD_S

    def release(self, plan_index: int) -> list[VllmFact]:
        """The held signals as hang signal facts, at their own lines; none held after."""
        facts = [
            VllmFact("hang_signal", h.data, h.ts, h.line_no, plan_index, ref=h.ref, held=True)
            for h in self._held
        ]
        self._held = []
        return facts

    def drop(self) -> None:
        self._held = []
