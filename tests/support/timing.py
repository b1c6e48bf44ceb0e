"""Relative timings for the linear-time tests. Never a wall-clock limit (the machine is shared):
a test compares the cost of one input with another's measured in the same run."""

from __future__ import annotations

import time
from collections.abc import Callable


def fastest(call: Callable[[], object], runs: int = 7) -> float:
    """The least CPU time this thread spent on one of ``runs`` calls. CPU time, not wall time:
    under a full test run (load average 12 on 2 cores) every call longer than a scheduler
    slice was preempted, the short baseline's were not, and a linear parse read as 74 times
    its baseline where it is 10 times on a quiet machine."""
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        call()
        best = min(best, time.thread_time() - started)
    return best
