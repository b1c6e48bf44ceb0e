"""How far behind this collector's ingest is: a silence is judged only up to what was stored.

A host's batch proves it alive when it arrives, not when it is stored. An overloaded collector
(more batches a second than it can store) answers later and later; its hosts' last stored
heartbeat falls behind with it, and without this every host would turn ``late`` at once, the
incidents opened for them adding to the load. ``lag_s`` is the age of the oldest ingest
request this process is still answering (counted from the moment the request reaches the app,
before its token is looked up); the checker judges overdue times against ``now - lag``, so a
collector running behind detects a freeze late, never a healthy host as silent. Replicas
publish their lag on their run row (``collector_runs.ingest_lag_s``) for the leader to use.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from agent.wire import INGEST_PATH


class IngestBacklog:
    """Ingest requests in progress in this process, by arrival time (monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._open: dict[int, float] = {}

    def arrived(self) -> int:
        with self._lock:
            key = next(self._ids)
            self._open[key] = self._clock()
            return key

    def answered(self, key: int) -> None:
        with self._lock:
            self._open.pop(key, None)

    def lag_s(self) -> float:
        """How long the oldest request in progress has waited; 0 when none waits."""
        with self._lock:
            oldest = min(self._open.values(), default=None)
        return 0.0 if oldest is None else max(0.0, self._clock() - oldest)


class BacklogMiddleware:
    """Counts every ``POST /api/v1/ingest`` from the moment it reaches the app."""

    def __init__(self, app: ASGIApp, *, backlog: IngestBacklog) -> None:
        self.app = app
        self.backlog = backlog

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != INGEST_PATH:
            await self.app(scope, receive, send)
            return
        key = self.backlog.arrived()
        try:
            await self.app(scope, receive, send)
        finally:
            self.backlog.answered(key)
