"""Decide from vLLM's metrics that its engine hung: /health stays 200 through a hung engine.

The honest signal (field reports from GB10 hosts): requests running while the generation-token
counter stays frozen; GPU power near idle strengthens the verdict (a spin-deadlock, not work).
"""

from __future__ import annotations

from dataclasses import dataclass

LOW_POWER_W = 30.0


@dataclass(frozen=True)
class HangVerdict:
    """A hung-state change (`vllm_hung` or `vllm_resumed`); since = last token progress."""

    kind: str
    ts: float
    since: float
    for_s: float
    running: int
    generation_tokens: float
    power_w: float | None = None
    low_power: bool = False


class HangDetector:
    """Feed one metrics sample at a time; get a verdict only when the hung state changes."""

    def __init__(self, stall_s: float = 15.0, low_power_w: float = LOW_POWER_W) -> None:
        self.stall_s = stall_s
        self.low_power_w = low_power_w
        self._tokens: float | None = None
        self._progress_ts: float | None = None
        self._hung = False

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
    ) -> HangVerdict | None:
        """Record one sample; return a verdict when the engine turns hung or resumes."""
        moved = self._tokens is None or generation_tokens != self._tokens
        # Any change counts, also a counter that went backwards (a restarted server).
        self._tokens = generation_tokens
        if moved or running <= 0:
            stalled_since = self._progress_ts
            self._progress_ts = ts
            if self._hung:
                self._hung = False
                assert stalled_since is not None
                return self._verdict(
                    "vllm_resumed", ts, stalled_since, running, generation_tokens, power_w
                )
            return None
        assert self._progress_ts is not None
        if not self._hung and ts - self._progress_ts >= self.stall_s:
            self._hung = True
            return self._verdict(
                "vllm_hung", ts, self._progress_ts, running, generation_tokens, power_w
            )
        return None

    def _verdict(
        self,
        kind: str,
        ts: float,
        since: float,
        running: int,
        tokens: float,
        power_w: float | None,
    ) -> HangVerdict:
        return HangVerdict(
            kind=kind,
            ts=ts,
            since=since,
            for_s=ts - since,
            running=running,
            generation_tokens=tokens,
            power_w=power_w,
            low_power=power_w is not None and power_w < self.low_power_w,
        )
