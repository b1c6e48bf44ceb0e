"""Batches that arrived but are not stored yet: their host is alive, whatever the database says.

A batch proves the host alive when it arrives; it updates the host's row only once it is
stored, which under load (the SQLite writer busy, a restart's replays all at once) can be
seconds later. The checker skips a host with a batch in hand, so queueing inside the
collector is never mistaken for a silent host. This process's own arrivals only: another
collector process on the same database knows its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Arrivals:
    """host id → how many of its batches this process is storing right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, int] = {}

    @contextmanager
    def holding(self, host_id: int) -> Iterator[None]:
        """While a batch of ``host_id`` is being stored."""
        with self._lock:
            self._pending[host_id] = self._pending.get(host_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._pending.pop(host_id) - 1
                if left:
                    self._pending[host_id] = left

    def pending(self, host_id: int) -> bool:
        with self._lock:
            return host_id in self._pending
