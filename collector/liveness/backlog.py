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

A request waits on us before it reaches the app too: accepted, read and dispatched by the event
loop, which a starved process (a restart's replays, SQLite stores on the loop, no CPU to spare)
runs late. Those requests are invisible to the middleware, and their hosts looked silent (CI:
several hosts "suspect" at once after 3.5 s, the ingest lag near zero). So the loop's lateness
counts too: ``watch_loop`` measures how late a timer of its fires, and a late turn counts for
``LOOP_MEMORY_S`` (requests read then still go through the app) times ``LOOP_TURNS``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.wire import INGEST_PATH

LOOP_PERIOD_S = 0.1
# Accepting a request, reading it and starting its task: about this many turns of the loop,
# each waiting as long as the loop runs late.
LOOP_TURNS = 3
LOOP_MEMORY_S = 5.0
# Lateness below this is the loop's ordinary work (a store, a collection): three such turns
# are well inside any grace's margin, and counting them only moved judging a check tick later
# (bench/detection.py: p99 4.98 s against 4.32 s).
LOOP_NOISE_S = 0.05


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
        self._loop_due: float | None = None  # when watch_loop's timer should fire next
        self._loop_late: deque[tuple[float, float]] = deque()  # (when, how late) recent turns

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
        """How long the request that has waited longest on us has waited (0 when none), or
        what the event loop's lateness makes a request not yet in the app wait, if longer."""
        with self._lock:
            now = self._clock()
            in_app = max((r.age(now) for r in self._open.values()), default=0.0)
            return max(in_app, LOOP_TURNS * self._loop_lateness(now))

    def loop_turned(self, late_s: float) -> None:
        """``watch_loop``'s timer fired ``late_s`` after it was due."""
        with self._lock:
            now = self._clock()
            self._loop_due = now + LOOP_PERIOD_S
            if late_s >= LOOP_NOISE_S:
                self._loop_late.append((now, late_s))

    def _loop_lateness(self, now: float) -> float:
        """The latest turn of the last ``LOOP_MEMORY_S``, or the one overdue now if later."""
        while self._loop_late and self._loop_late[0][0] < now - LOOP_MEMORY_S:
            self._loop_late.popleft()
        overdue = 0.0 if self._loop_due is None else now - self._loop_due
        if overdue < LOOP_NOISE_S:
            overdue = 0.0  # the timer about to fire, as the remembered turns' floor
        return max(overdue, max((late for _at, late in self._loop_late), default=0.0))

    async def watch_loop(self) -> None:
        """Runs on the serving loop until cancelled: times its own timer."""
        try:
            self.loop_turned(0.0)
            while True:
                due = self._clock() + LOOP_PERIOD_S
                await asyncio.sleep(LOOP_PERIOD_S)
                self.loop_turned(max(0.0, self._clock() - due))
        finally:
            with self._lock:
                self._loop_due = None  # no loop to be late any more


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
