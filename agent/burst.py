"""Burst mode: sample at 10 Hz for a minute when vLLM starts loading or the GPU driver faults.

The driver's failed allocations last well under a second; a 1 s sampler can miss the dip in
MemAvailable that explains them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# vLLM log phrases that mean "the loading phase begins" (see reference §1.2).
VLLM_TRIGGERS = ("Starting to load model", "Loading weights", "Loading drafter model")
# Kernel/driver fault markers: a cheap substring check, the collector classifies properly.
GPU_FAULT_TRIGGERS = ("NVRM:", "Xid", "NV_ERR_")


def is_trigger_line(line: dict[str, Any]) -> str | None:
    """The reason a shipped line should start a burst, or None. Pure."""
    text = line.get("text") or ""
    if line.get("source") == "vllm":
        for phrase in VLLM_TRIGGERS:
            if phrase in text:
                return f"vllm: {phrase}"
        return None
    for marker in GPU_FAULT_TRIGGERS:
        if marker in text:
            return f"gpu fault: {marker}"
    return None


class BurstController:
    """Tracks whether a burst is active; ``trigger`` (re)starts the window, thread-safe."""

    def __init__(
        self,
        duration_s: float = 60.0,
        hz: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.duration_s = duration_s
        self.period_s = 1.0 / hz
        self._clock = clock
        self._lock = threading.Lock()
        self._until = float("-inf")
        self.reason: str | None = None

    def trigger(self, reason: str) -> bool:
        """Start or extend the burst; True when this started a new one (worth an event)."""
        with self._lock:
            now = self._clock()
            started = now >= self._until
            self._until = now + self.duration_s
            self.reason = reason
            return started

    def observe(self, line: dict[str, Any]) -> str | None:
        """Trigger from a line if it qualifies; the reason, or None."""
        reason = is_trigger_line(line)
        if reason is not None:
            self.trigger(reason)
        return reason

    @property
    def active(self) -> bool:
        with self._lock:
            return self._clock() < self._until

    def interval(self, base: float) -> float:
        """The sampler's next sleep: the burst period while active, else ``base``."""
        return min(base, self.period_s) if self.active else base

    def mark(self, sample: dict[str, Any]) -> dict[str, Any]:
        """Set the sample's ``burst`` flag from the current state."""
        sample["burst"] = self.active
        return sample
