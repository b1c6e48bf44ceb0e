"""Canary lines → per-channel latency (p50/p99) and loss; pure, no database."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from agent.canary import CANARY_PREFIX

_CANARY = re.compile(rf"{re.escape(CANARY_PREFIX)} (\d+) (\d+(?:\.\d+)?)\s*$")


def parse_canary(text: str) -> tuple[int, float] | None:
    """``freezewatch canary <n> <wall>`` → (n, sent wall time), anything else → None."""
    m = _CANARY.search(text)
    return (int(m.group(1)), float(m.group(2))) if m else None


@dataclass(frozen=True)
class ChannelCanary:
    received: int  # distinct canaries in the window
    expected: int  # canaries any channel proves were sent, in the window
    lost: int
    duplicates: int
    p50_ms: float | None
    p99_ms: float | None


class CanaryStats:
    """Canary observations of one host (and agent run) over the last ``window`` numbers.

    A canary counts as sent once any channel saw it (or a later one), so a channel's loss
    is the numbers it is missing in that range. Latency is collector receive time minus the
    agent's wall time in the line, so it includes any clock offset between the two.
    """

    def __init__(self, window: int = 360) -> None:
        self.window = window
        self._latency: dict[str, dict[int, float]] = {}  # channel → n → seconds
        self._duplicates: Counter[str] = Counter()
        self._first: int | None = None
        self._top: int | None = None

    def observe(self, channel: str, n: int, sent_wall: float, received_wall: float) -> None:
        seen = self._latency.setdefault(channel, {})
        if n in seen:
            self._duplicates[channel] += 1
            return
        seen[n] = received_wall - sent_wall
        self._first = n if self._first is None else min(self._first, n)
        if self._top is None or n > self._top:
            self._top = n
            floor = n - self.window
            for per_channel in self._latency.values():
                for old in [k for k in per_channel if k <= floor]:
                    del per_channel[old]

    def observe_text(self, channel: str, text: str, received_wall: float) -> bool:
        """Observe ``text`` if it is a canary line; returns whether it was one."""
        parsed = parse_canary(text)
        if parsed is not None:
            self.observe(channel, parsed[0], parsed[1], received_wall)
        return parsed is not None

    def channels(self) -> list[str]:
        return sorted(self._latency)

    def summary(self, channel: str) -> ChannelCanary:
        seen = self._latency.get(channel, {})
        if self._top is None or self._first is None:
            return ChannelCanary(0, 0, 0, 0, None, None)
        low = max(self._first, self._top - self.window + 1)
        expected = self._top - low + 1
        received = sum(1 for n in seen if n >= low)
        values = sorted(v for n, v in seen.items() if n >= low)
        return ChannelCanary(
            received=received,
            expected=expected,
            lost=expected - received,
            duplicates=self._duplicates[channel],
            p50_ms=_percentile_ms(values, 50),
            p99_ms=_percentile_ms(values, 99),
        )


def _percentile_ms(sorted_s: list[float], p: float) -> float | None:
    """Nearest-rank percentile in milliseconds."""
    if not sorted_s:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_s)))
    return round(sorted_s[rank - 1] * 1000, 3)
