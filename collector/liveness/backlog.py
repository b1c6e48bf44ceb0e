"""How far behind this collector's ingest is: a silence is judged only up to what was stored.

A host's batch proves it alive when it arrives, not when it is stored. An overloaded collector
(more batches a second than it can store) answers later and later; its hosts' last stored
heartbeat falls behind with it, and without this every host would turn ``late`` at once, the
incidents opened for them adding to the load. ``lag_s`` is how long the oldest ingest request
in progress has waited on this collector (from the moment it reached the app; time spent
waiting for the client to send its body does not count, so a client stuck mid-request delays
nothing); the checker judges overdue times against ``now - lag``, so a collector running behind
detects a freeze late, never a healthy host as silent. Replicas publish their lag on their run
row (``collector_runs.ingest_lag_s``) for the leader to use.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.wire import INGEST_PATH


class _Request:
    """One ingest request in progress: its wait on us, not on its client."""

    def __init__(self, now: float) -> None:
        self.started = now
        self.on_client = 0.0  # seconds spent waiting for the client's body
        self.waiting_since: float | None = None

    def age(self, now: float) -> float:
        client = self.on_client + (now - self.waiting_since if self.waiting_since else 0.0)
        return max(0.0, now - self.started - client)


class IngestBacklog:
    """Ingest requests in progress in this process (monotonic clock)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._open: dict[int, _Request] = {}

    def arrived(self) -> int:
        with self._lock:
            key = next(self._ids)
            self._open[key] = _Request(self._clock())
            return key

    def waiting_for_client(self, key: int, waiting: bool) -> None:
        with self._lock:
            request = self._open.get(key)
            if request is None:
                return
            now = self._clock()
            if waiting:
                request.waiting_since = now
            elif request.waiting_since is not None:
                request.on_client += now - request.waiting_since
                request.waiting_since = None

    def answered(self, key: int) -> None:
        with self._lock:
            self._open.pop(key, None)

    def lag_s(self) -> float:
        """How long the request that has waited longest on us has waited; 0 when none."""
        with self._lock:
            now = self._clock()
            return max((r.age(now) for r in self._open.values()), default=0.0)


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

        async def from_client() -> Message:
            self.backlog.waiting_for_client(key, True)
            try:
                return await receive()
            finally:
                self.backlog.waiting_for_client(key, False)

        try:
            await self.app(scope, from_client, send)
        finally:
            self.backlog.answered(key)
