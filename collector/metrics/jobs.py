"""This process's background jobs: how long each run of each job took, whether this process
leads (runs the singleton jobs), and how often ``serve --workers`` restarted a worker. The
checker's tick is the figure to watch: it must not grow with the rows stored, only with the
hosts it judges."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import Collector

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class JobMetrics:
    """Job durations and the leader flag of one app (each app its own registry entries)."""

    def __init__(self) -> None:
        self.duration = Histogram(
            "freezewatch_job_duration_seconds",
            "Time one run of a background job took (singleton jobs: in the leader only).",
            ["job"],
            buckets=BUCKETS,
            registry=None,
        )
        self.leader = Gauge(
            "freezewatch_leader",
            "1 while this collector process runs the singleton jobs (checker, alerts, pruning).",
            registry=None,
            multiprocess_mode="livemax",  # serve --workers: 1 while one of them does
        )
        # Counted by each replacement as it starts; the counts of dead workers stay in their
        # metric files, so the sum is every restart since the collector started.
        self.worker_restarts = Counter(
            "freezewatch_worker_restarts",
            "Workers of serve --workers started again after one died (0 in one process).",
            registry=None,
        )

    def collectors(self) -> Iterable[Collector]:
        return (self.duration, self.leader, self.worker_restarts)
