"""This process's ingest figures: requests by HTTP status and their duration (an ASGI
middleware on the ingest path), records stored and duplicated (reported by the route)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.wire import INGEST_PATH
from collector.schemas import IngestResult

STREAMS = ("samples", "lines", "events")
# Ingest of a batch takes milliseconds; a slow database shows in the upper buckets.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class IngestMetrics:
    """Counters of one app (not in prometheus_client's global registry: each app its own)."""

    def __init__(self) -> None:
        self.requests = Counter(
            "freezewatch_ingest_requests",
            "Ingest requests answered, by HTTP status.",
            ["code"],
            registry=None,
        )
        self.duration = Histogram(
            "freezewatch_ingest_request_duration_seconds",
            "Time to answer an ingest request (body read, validation, storage).",
            buckets=BUCKETS,
            registry=None,
        )
        self.records = Counter(
            "freezewatch_ingest_records",
            "Records in accepted batches: stored, or duplicate (a retry or a spool replay).",
            ["stream", "outcome"],
            registry=None,
        )
        # Children looked up once, not per request: label lookups showed in every profile.
        self._stored = {s: self.records.labels(s, "stored") for s in STREAMS}
        self._duplicate = {s: self.records.labels(s, "duplicate") for s in STREAMS}
        self._answered: dict[int, Any] = {}

    def answered(self, status: int, seconds: float) -> None:
        """One request answered with ``status`` after ``seconds``."""
        counter = self._answered.get(status)
        if counter is None:
            counter = self._answered[status] = self.requests.labels(str(status))
        counter.inc()
        self.duration.observe(seconds)

    def collectors(self) -> Iterable[Collector]:
        return (self.requests, self.duration, self.records)

    def observe(self, result: IngestResult) -> None:
        for stream in STREAMS:
            if stored := getattr(result.stored, stream):
                self._stored[stream].inc(stored)
            if duplicate := getattr(result.duplicates, stream):
                self._duplicate[stream].inc(duplicate)


class IngestMetricsMiddleware:
    """Times and counts ``POST /api/v1/ingest`` whatever answers it (route, auth, a 413)."""

    def __init__(self, app: ASGIApp, *, metrics: IngestMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != INGEST_PATH:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the response starts is answered 500

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            self.metrics.answered(status, time.perf_counter() - started)
