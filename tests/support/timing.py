"""Relative timings for the linear-time tests. Never a wall-clock limit (the machine is shared):
a test compares the cost of one input with another's measured in the same run."""

from __future__ import annotations

import time
from collections.abc import Callable


def fastest(call: Callable[[], object], runs: int = 7) -> float:
    """The least wall time of ``runs`` calls: the run other work disturbed least."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best
