"""Login attempts per client address: a few wrong tokens are free, then each further try
waits twice as long as the last (up to ``MAX_WAIT_S``); a right token clears the address."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

FREE_FAILURES = 5
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 300.0
# Addresses remembered at most (the oldest is forgotten first) and for how long.
MAX_ADDRESSES = 10_000
FORGET_AFTER_S = 86400.0


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, _Failures] = {}

    def retry_after(self, address: str) -> int:
        """Whole seconds ``address`` must wait before its next try (0: it may try now)."""
        with self._lock:
            entry = self._failures.get(address)
        if entry is None or entry.count < FREE_FAILURES:
            return 0
        wait = min(FIRST_WAIT_S * 2.0 ** (entry.count - FREE_FAILURES), MAX_WAIT_S)
        return max(0, math.ceil(entry.last + wait - self._clock()))

    def failed(self, address: str) -> None:
        now = self._clock()
        with self._lock:
            entry = self._failures.pop(address, None) or _Failures(0, now)
            self._failures[address] = _Failures(entry.count + 1, now)  # newest last
            while self._failures:
                oldest = next(iter(self._failures))
                stale = now - self._failures[oldest].last > FORGET_AFTER_S
                if not stale and len(self._failures) <= MAX_ADDRESSES:
                    break
                del self._failures[oldest]

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._failures.pop(address, None)
