"""The in-memory queue between sources and the shipper; waking it is how lines skip the timer."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class Outbox:
    """Thread-safe queues of unsequenced samples, lines and events; ``wait`` wakes on any put."""

    def __init__(self) -> None:
        self._cond = threading.Condition()  # RLock inside: a signal handler may call wake()
        self._samples: deque[dict[str, Any]] = deque()
        self._lines: deque[dict[str, Any]] = deque()
        self._events: deque[dict[str, Any]] = deque()
        self._woken = False

    def put_sample(self, sample: dict[str, Any]) -> None:
        self._put(self._samples, sample)

    def put_line(self, line: dict[str, Any]) -> None:
        self._put(self._lines, line)

    def put_event(self, event: dict[str, Any]) -> None:
        """``event`` is ``{"ts", "kind", "data"}`` without seq."""
        self._put(self._events, event)

    def _put(self, queue: deque[dict[str, Any]], record: dict[str, Any]) -> None:
        with self._cond:
            queue.append(record)
            self._woken = True
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify()

    def wait(self, timeout: float) -> bool:
        """Block until something is put (or ``wake``) or ``timeout``; True if woken."""
        with self._cond:
            if not self._woken:
                self._cond.wait(timeout)
            woken, self._woken = self._woken, False
            return woken

    def __len__(self) -> int:
        with self._cond:
            return len(self._samples) + len(self._lines) + len(self._events)

    def drain(
        self, max_records: int, max_bytes: int, *, lines: bool = True
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(samples, lines, events) in arrival order per stream, within the batch limits."""
        samples: list[dict[str, Any]] = []
        taken: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        budget_records, budget_bytes = max_records, max_bytes
        with self._cond:
            pairs = [(self._events, events), (self._samples, samples)]
            if lines:
                pairs.append((self._lines, taken))
            for queue, dest in pairs:
                while queue and budget_records > 0:
                    size = len(queue[0].get("text", "")) + 512  # rough JSON size of a record
                    if size > budget_bytes and dest:
                        break
                    dest.append(queue.popleft())
                    budget_records -= 1
                    budget_bytes -= size
            # more left: the next wait returns at once; else only a new put wakes it
            self._woken = bool(self._samples or self._lines or self._events)
        return samples, taken, events
