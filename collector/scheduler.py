"""The background jobs: APScheduler only calls the idempotent steps of the domains."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta, timezone

import httpx
from apscheduler.events import EVENT_SCHEDULER_SHUTDOWN
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm import Session, sessionmaker

from collector import heap
from collector.alerts.delivery import deliver_due_alerts
from collector.incidents.lifecycle import settle_incidents
from collector.incidents.postmortem import collect_postmortems
from collector.liveness import due
from collector.liveness.arrivals import Arrivals
from collector.liveness.checker import check_heartbeats, prober, start_pre_probes
from collector.liveness.collector_runs import release_held_alerts, tick_collector_alive
from collector.liveness.preprobes import PreProbes
from collector.remote.ssh import SSHClient
from collector.retention.prune import prune
from collector.retention.usage import measure_if_due
from collector.settings import Settings
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)


def _guarded(name: str, step: Callable[[], object]) -> Callable[[], None]:
    """A failing step is logged and tried again on the next tick, never kills the scheduler."""

    def job() -> None:
        try:
            step()
        except Exception:
            log.exception("job %s failed", name)

    return job


def build_scheduler(
    session_factory: sessionmaker[Session],
    *,
    settings: Settings,
    run_id: int,
    http_client: httpx.Client,
    ssh: SSHClient,
    clock: Callable[[], float],
    arrivals: Arrivals | None = None,
    stopping: threading.Event | None = None,
) -> BackgroundScheduler:
    """A scheduler with every job added, not yet started. Once ``stopping`` is set (the
    process no longer takes batches) the liveness jobs judge no host."""
    scheduler = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 30}
    )

    def now() -> datetime:
        return from_epoch(clock())

    def add(name: str, seconds: float, step: Callable[[], object]) -> None:
        scheduler.add_job(_guarded(name, step), "interval", seconds=seconds, id=name, name=name)

    def deliver() -> None:
        deliver_due_alerts(session_factory, now=now(), http_client=http_client, settings=settings)

    # A step runs when something may be due (an idle tick costs a comparison in memory), and a
    # job ticking for steps with nothing due sleeps until the gate reads again.
    gate = due.Due(session_factory, settings=settings)

    def rest(job_id: str, at: datetime, *steps: str) -> None:
        idle = gate.idle_for(at, *steps)
        if idle > timedelta(seconds=settings.check_interval_s):
            with suppress(JobLookupError):
                scheduler.modify_job(job_id, next_run_time=datetime.now(timezone.utc) + idle)

    def deliver_if_due() -> None:
        if gate(due.DELIVER, now(), fresh=True):  # an alert queued by ingest: within a tick
            deliver()

    pre_probes = PreProbes()
    scheduler.add_listener(lambda _event: pre_probes.shutdown(), EVENT_SCHEDULER_SHUTDOWN)
    run_probes = prober(settings, ssh)

    stopping = stopping or threading.Event()
    told = threading.Event()

    def watching() -> bool:
        if not stopping.is_set():
            return True
        if not told.is_set():
            told.set()
            log.info("collector stopping: no host is judged any more")
        return False

    def check() -> None:
        if not watching():
            return
        at = now()
        busy = {step: gate(step, at) for step in (due.HEARTBEATS, due.SETTLE, due.RELEASE)}
        if not any(busy.values()):
            rest("check_heartbeats", at, *busy)
            return
        opened = settled = released = []
        if busy[due.HEARTBEATS]:
            opened = check_heartbeats(
                session_factory,
                now=at,
                settings=settings,
                probe_runner=run_probes,
                ssh=ssh,
                pre_probes=pre_probes,
                arrivals=arrivals,
            )
        if busy[due.SETTLE]:
            settled = settle_incidents(session_factory, now=at, settings=settings)
        if busy[due.RELEASE]:
            released = release_held_alerts(session_factory, now=at, settings=settings)
        if opened or settled or released:
            gate.expire()
            deliver()  # don't wait for the delivery tick: seconds matter here

    add("check_heartbeats", settings.check_interval_s, check)

    # Separate job: check_heartbeats may wait up to a probe deadline for a late host's probes.
    def suspects() -> None:
        if not watching():
            return
        at = now()
        if not (pre_probes.pending() or gate(due.PRE_PROBES, at)):
            rest("pre_probes", at, due.PRE_PROBES)
            return
        start_pre_probes(
            session_factory,
            now=at,
            settings=settings,
            pre_probes=pre_probes,
            run=run_probes,
            arrivals=arrivals,
        )

    add("pre_probes", settings.check_interval_s, suspects)
    add("deliver_alerts", settings.delivery_interval_s, deliver_if_due)
    add(
        "collector_alive",
        settings.alive_tick_s,
        lambda: tick_collector_alive(session_factory, run_id=run_id, now=now()),
    )
    add("trim_heap", heap.TRIM_INTERVAL_S, heap.trim)
    add(
        "postmortems",
        settings.postmortem_interval_s,
        lambda: (
            gate(due.POSTMORTEMS, now())
            and collect_postmortems(session_factory, now=now(), settings=settings, ssh=ssh)
        ),
    )

    def keep_within_retention() -> None:
        at = clock()
        prune(session_factory, now=at, settings=settings)
        measure_if_due(session_factory, now=at, settings=settings)

    add("retention", settings.retention_interval_s, keep_within_retention)
    return scheduler
