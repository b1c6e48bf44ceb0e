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
        self._line_bytes = 0  # the rough JSON size of the queued lines (see ``size``)
        self._woken = False

    def put_sample(self, sample: dict[str, Any]) -> None:
        self._put(self._samples, sample)

    def put_line(self, line: dict[str, Any]) -> None:
        with self._cond:
            self._lines.append(line)
            self._line_bytes += size(line)
            if not self._woken:
                self._woken = True
                self._cond.notify()

    def put_event(self, event: dict[str, Any]) -> None:
        """``event`` is ``{"ts", "kind", "data"}`` without seq."""
        self._put(self._events, event)

    def _put(self, queue: deque[dict[str, Any]], record: dict[str, Any]) -> None:
        with self._cond:
            queue.append(record)
            if not self._woken:  # else the shipper was told already and has yet to drain
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
                fits = len(queue) <= budget_records and self._line_bytes <= budget_bytes
                if queue is self._lines and fits:  # a burst's common case: all of it
                    dest.extend(queue)
                    queue.clear()
                    budget_records -= len(dest)
                    budget_bytes -= self._line_bytes
                    self._line_bytes = 0
                    continue
                take, append = queue.popleft, dest.append
                while queue and budget_records > 0:
                    cost = size(queue[0])
                    if cost > budget_bytes and dest:
                        break
                    append(take())
                    budget_records -= 1
                    budget_bytes -= cost
                    if queue is self._lines:
                        self._line_bytes -= cost
            # more left: the next wait returns at once; else only a new put wakes it
            self._woken = bool(self._samples or self._lines or self._events)
        return samples, taken, events


def size(record: dict[str, Any]) -> int:
    """A record's rough JSON size, what batches are cut by."""
    return len(record.get("text", "")) + 512
