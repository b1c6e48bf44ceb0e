"""One scrape: a registry of this moment's collectors, encoded as the scraper asked
(OpenMetrics for Prometheus, the classic text format otherwise).

Under ``serve --workers`` a scrape reaches one worker of several: the per-process families
(ingest, jobs) are then prometheus_client's multiprocess files of every worker, summed (the
supervisor points ``PROMETHEUS_MULTIPROC_DIR`` at ``METRICS_DIR`` before it starts them), and the
``process_*``/``python_*`` families, which could only describe the worker that answered, are
left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import CollectorRegistry
from sqlalchemy.orm import Session

from collector.metrics.counts import count_metrics
from collector.metrics.hosts import host_metrics
from collector.metrics.ingest import IngestMetrics
from collector.metrics.jobs import JobMetrics

METRICS_DIR = "metrics"  # under the workers' shared directory
# The netconsole receiver's own figures: (stats key, help).
RECEIVER_COUNTERS = (
    ("datagrams", "Allowlisted netconsole datagrams received."),
    ("records", "Netconsole records parsed and handed to storage."),
    ("unknown_datagrams", "Datagrams from unknown senders, dropped."),
    ("persist_errors", "Batches whose raw copy failed to store."),
    ("store_errors", "Record batches that failed to store."),
)
RECEIVER_GAUGES = (
    ("store_queue", "Datagrams received but not yet parsed and stored."),
    ("pending_fragments", "Fragmented records awaiting their rest."),
)


class _Snapshot:
    """The database-backed families of one scrape (a prometheus_client custom collector)."""

    def __init__(self, session: Session, *, now: float, netconsole: dict[str, Any] | None) -> None:
        self.session, self.now, self.netconsole = session, now, netconsole

    def collect(self) -> Iterator[Metric]:
        yield from host_metrics(self.session, now=self.now)
        yield from count_metrics(self.session, now=self.now)
        if self.netconsole is not None:
            yield from receiver_metrics(self.netconsole)


def receiver_metrics(stats: dict[str, Any]) -> Iterator[Metric]:
    for key, help_ in RECEIVER_COUNTERS:
        yield CounterMetricFamily(f"freezewatch_netconsole_{key}", help_, value=stats[key])
    for key, help_ in RECEIVER_GAUGES:
        yield GaugeMetricFamily(f"freezewatch_netconsole_{key}", help_, value=stats[key])


def render(
    session: Session,
    *,
    now: float,
    ingest: IngestMetrics,
    netconsole: dict[str, Any] | None,
    accept: str,
    jobs: JobMetrics | None = None,
    multiprocess_dir: Path | None = None,
) -> tuple[bytes, str]:
    """The exposition body and its content type; ``multiprocess_dir``: the workers' metrics
    files, read instead of this process's own."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir is not None:
        MultiProcessCollector(registry, path=str(multiprocess_dir))  # type: ignore[no-untyped-call]
    else:
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        for collector in [*ingest.collectors(), *(jobs.collectors() if jobs else ())]:
            registry.register(collector)
    registry.register(_Snapshot(session, now=now, netconsole=netconsole))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
