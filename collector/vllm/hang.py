"""Decide from vLLM's metrics that its engine hung: /health stays 200 through a hung engine.

The honest signal (field reports from GB10 hosts): requests in the engine while nothing moves;
GPU power near idle strengthens the verdict (a spin-deadlock, not work). "Moves" is any of the
counters an engine step advances: generated and prompt tokens, the per-step token histogram
(``vllm:iteration_tokens_total``) and the KV-cache usage. vLLM emits no token until a chunked
prefill ends, so a long prefill shows only the last two moving: it is work, not a hang.
Requests only waiting (none running, nothing scheduled) while nothing moves is a hang too.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

LOW_POWER_W = 30.0


@dataclass(frozen=True)
class Progress:
    """The counters of one metrics sample that move when the engine makes a step."""

    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    iteration_tokens: float | None = None
    kv_usage: float | None = None


@dataclass(frozen=True)
class HangVerdict:
    """A hung-state change (`vllm_hung` or `vllm_resumed`); since = last progress.

    ``reason``: ``running`` (requests running, no step) or ``waiting`` (requests only queued,
    none scheduled)."""

    kind: str
    ts: float
    since: float
    for_s: float
    running: int
    generation_tokens: float
    power_w: float | None = None
    low_power: bool = False
    waiting: int = 0
    reason: str = "running"


class HangDetector:
    """Feed one metrics sample at a time; get a verdict only when the hung state changes."""

    def __init__(self, stall_s: float = 15.0, low_power_w: float = LOW_POWER_W) -> None:
        self.stall_s = stall_s
        self.low_power_w = low_power_w
        self._last: Progress | None = None
        self._progress_ts: float | None = None
        self._hung = False

    def state(self) -> dict[str, Any]:
        """What the next ``observe`` depends on, as JSON (``restore`` takes it back)."""
        last = self._last
        return {
            "stall_s": self.stall_s,
            "low_power_w": self.low_power_w,
            "last": None if last is None else list(astuple(last)),
            "progress_ts": self._progress_ts,
            "hung": self._hung,
        }

    @classmethod
    def restore(cls, state: dict[str, Any]) -> HangDetector:
        detector = cls(float(state["stall_s"]), float(state["low_power_w"]))
        last = state.get("last")
        detector._last = None if last is None else Progress(*last)
        detector._progress_ts = state.get("progress_ts")
        detector._hung = bool(state.get("hung"))
        return detector

    @property
    def hung(self) -> bool:
        """Whether the last verdict was `vllm_hung` and no resume came since."""
        return self._hung

    def observe(
        self,
        ts: float,
        running: int,
        generation_tokens: float,
        power_w: float | None = None,
        *,
        waiting: int = 0,
        prompt_tokens: float | None = None,
        iteration_tokens: float | None = None,
        kv_usage: float | None = None,
    ) -> HangVerdict | None:
        """Record one sample; return a verdict when the engine turns hung or resumes."""
        now = Progress(generation_tokens, prompt_tokens, iteration_tokens, kv_usage)
        # Any change counts, also a counter that went backwards (a restarted server).
        moved = self._last is None or _moved(self._last, now)
        self._last = now
        busy = running > 0 or waiting > 0
        verdict = None
        if moved or not busy:
            stalled_since = self._progress_ts
            self._progress_ts = ts
            if self._hung:
                self._hung = False
                assert stalled_since is not None
                verdict = self._verdict(
                    "vllm_resumed", ts, stalled_since, running, waiting, power_w
                )
            return verdict
        assert self._progress_ts is not None
        if not self._hung and ts - self._progress_ts >= self.stall_s:
            self._hung = True
            verdict = self._verdict("vllm_hung", ts, self._progress_ts, running, waiting, power_w)
        return verdict

    def _verdict(
        self,
        kind: str,
        ts: float,
        since: float,
        running: int,
        waiting: int,
        power_w: float | None,
    ) -> HangVerdict:
        assert self._last is not None
        return HangVerdict(
            kind=kind,
            ts=ts,
            since=since,
            for_s=ts - since,
            running=running,
            generation_tokens=self._last.generation_tokens or 0.0,
            power_w=power_w,
            low_power=power_w is not None and power_w < self.low_power_w,
            waiting=waiting,
            reason="running" if running > 0 else "waiting",
        )


def _moved(before: Progress, now: Progress) -> bool:
    """A counter both samples have that changed between them."""
    return any(
        a is not None and b is not None and a != b
        for a, b in (
            (before.generation_tokens, now.generation_tokens),
            (before.prompt_tokens, now.prompt_tokens),
            (before.iteration_tokens, now.iteration_tokens),
            (before.kv_usage, now.kv_usage),
        )
    )
