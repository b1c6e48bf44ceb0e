"""Probes started before grace ends, kept per silence, so an incident can open right at grace.

A host silent for ``grace - lead`` is *suspect* (``lead`` is ``probe_lead_s``, at most half the
grace): the checker starts its probes in the background and keeps them here, keyed by the host
and the silence (the host's ``overdue_at``, which every heartbeat moves on). At grace the
checker takes that silence's probes; a heartbeat before grace makes them stale and they are
dropped (counted in ``cleared``). Suspect is not a host status: it lives in this process only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

ProbeResults = list[dict[str, Any]]


def lead_s(grace_s: float, probe_lead_s: float) -> float:
    """How long before grace the probes start: at most half the grace, so a host is suspect
    only after it missed more than it answered."""
    return max(0.0, min(probe_lead_s, grace_s / 2))


@dataclass(frozen=True)
class PreProbe:
    overdue_at: datetime
    future: Future[ProbeResults]


class PreProbes:
    """The running and finished pre-probes of one checker process, one per host."""

    def __init__(self, *, executor: Executor | None = None, max_workers: int = 64) -> None:
        # One worker per probed host: a queued pre-probe would start late and eat its lead.
        self._executor = executor or ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="preprobe"
        )
        self._entries: dict[int, PreProbe] = {}
        self._lock = threading.Lock()
        self.started = 0
        self.cleared = 0  # suspect hosts heard from again before grace

    def start(self, host_id: int, overdue_at: datetime, run: Callable[[], ProbeResults]) -> bool:
        """Start ``run`` for this silence unless it already runs; True if started now."""
        with self._lock:
            entry = self._entries.get(host_id)
            if entry is not None and entry.overdue_at == overdue_at:
                return False
            self._entries[host_id] = PreProbe(overdue_at, self._executor.submit(run))
            self.started += 1
            return True

    def take(self, host_id: int, overdue_at: datetime) -> Future[ProbeResults] | None:
        """The probes of exactly this silence (removed from the registry), or None."""
        with self._lock:
            entry = self._entries.pop(host_id, None)
        if entry is None or entry.overdue_at != overdue_at:
            return None
        return entry.future

    def pending(self) -> dict[int, datetime]:
        """host id → the overdue time its pre-probes belong to."""
        with self._lock:
            return {host_id: e.overdue_at for host_id, e in self._entries.items()}

    def discard(self, host_id: int, overdue_at: datetime, *, cleared: bool) -> None:
        """Drop the pre-probes of that silence (a running one finishes on its own deadline)."""
        with self._lock:
            entry = self._entries.get(host_id)
            if entry is None or entry.overdue_at != overdue_at:
                return  # taken meanwhile, or already a newer silence
            del self._entries[host_id]
            if cleared:
                self.cleared += 1

    def clear(self) -> None:
        """Forget every silence (this process stopped leading; running probes end on their own
        deadline)."""
        with self._lock:
            self._entries.clear()

    def shutdown(self) -> None:
        with self._lock:
            self._entries.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
