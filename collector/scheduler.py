"""The background jobs: APScheduler only calls the idempotent steps of the domains.

Most jobs are singletons: with replicas on one PostgreSQL only the leader runs them
(``collector.leader``), and a replica that takes over starts them on its next tick. Every
process ticks its own run's sign of life, trims its heap and keeps trying for the lead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta, timezone

import httpx
from apscheduler.events import EVENT_SCHEDULER_SHUTDOWN
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm import Session, sessionmaker

from collector import heap
from collector.alerts import outbox
from collector.alerts.delivery import deliver_due_alerts
from collector.incidents.postmortem import collect_postmortems
from collector.leader import Leadership
from collector.liveness import due
from collector.liveness.arrivals import Arrivals
from collector.liveness.backlog import IngestBacklog
from collector.liveness.checker import check_heartbeats, prober
from collector.liveness.collector_runs import (
    release_held_alerts,
    settle_returned,
    tick_collector_alive,
)
from collector.liveness.preprobes import PreProbes
from collector.liveness.suspects import start_pre_probes
from collector.metrics.jobs import JobMetrics
from collector.remote.ssh import SSHClient
from collector.retention.prune import prune
from collector.retention.usage import measure_if_due
from collector.settings import Settings
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)


def _guarded(
    name: str, step: Callable[[], object], jobs: JobMetrics, leadership: Leadership | None
) -> Callable[[], None]:
    """A failing step is logged and tried again on the next tick, never kills the scheduler.
    With ``leadership`` the step runs only while this process leads. Each run is timed."""
    took = jobs.duration.labels(name)

    def job() -> None:
        if leadership is not None and not leadership.held:
            return
        started = time.perf_counter()
        try:
            step()
        except Exception:
            log.exception("job %s failed", name)
        took.observe(time.perf_counter() - started)

    return job


def build_scheduler(
    session_factory: sessionmaker[Session],
    *,
    settings: Settings,
    run_id: int,
    http_client: httpx.Client,
    ssh: SSHClient,
    clock: Callable[[], float],
    leadership: Leadership,
    jobs: JobMetrics | None = None,
    backlog: IngestBacklog | None = None,
    arrivals: Arrivals | None = None,
    stopping: threading.Event | None = None,
) -> BackgroundScheduler:
    """A scheduler with every job added, not yet started. Singleton jobs run while this
    process holds ``leadership``. Once ``stopping`` is set (the process no longer takes
    batches) the liveness jobs judge no host and the lead is handed on."""
    scheduler = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 30}
    )

    def now() -> datetime:
        return from_epoch(clock())

    jobs = jobs or JobMetrics()

    def add(
        name: str, seconds: float, step: Callable[[], object], *, singleton: bool = True
    ) -> None:
        job = _guarded(name, step, jobs, leadership if singleton else None)
        scheduler.add_job(job, "interval", seconds=seconds, id=name, name=name)

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
        fresh = outbox.QUEUED.is_set()  # an alert this process queued goes out within a tick
        outbox.QUEUED.clear()
        if gate(due.DELIVER, now(), fresh=fresh):
            deliver()
            gate.expire()  # what it sent is no longer due: the next question reads again

    pre_probes = PreProbes()
    scheduler.add_listener(lambda _event: pre_probes.shutdown(), EVENT_SCHEDULER_SHUTDOWN)
    stopping = stopping or threading.Event()
    told = threading.Event()
    backlog = backlog or IngestBacklog()
    fleet_lag = [0.0]  # the largest ingest lag of the live processes, as of the last alive tick

    def lag_s() -> float:
        return max(fleet_lag[0], backlog.lag_s())

    run_probes = prober(settings, ssh, backlog.lag_s)  # this process's own lateness

    def alive() -> None:
        own = backlog.lag_s()
        fleet_lag[0] = tick_collector_alive(
            session_factory, run_id=run_id, now=now(), lag_s=own, stale_s=settings.alive_tick_s * 3
        )
        if fleet_lag[0] > settings.grace_s:
            log.warning(
                "ingest is %.1f s behind: silences are judged that much later", fleet_lag[0]
            )

    def lead() -> None:
        if stopping.is_set():
            leadership.release()  # a replica takes the singleton jobs over now
            return
        was = leadership.held
        held = leadership.refresh()
        jobs.leader.set(1 if held else 0)  # each worker's own, when a scrape is another's
        if not held and was:
            pre_probes.clear()  # the next leader probes its own suspects

    add("leadership", settings.leader_check_s, lead, singleton=False)

    def watching() -> bool:
        if not stopping.is_set():
            return True
        if not told.is_set():
            told.set()
            log.info("collector stopping: no host is judged any more")
        return False

    judged_since: list[object] = [None]  # leadership.since when check() last judged

    def check() -> None:
        if not watching():
            return
        at = now()
        # A new leader looks at everything once: the former leader's claims are its orphans.
        takeover = leadership.since != judged_since[0]
        judged_since[0] = leadership.since
        steps = (due.HEARTBEATS, due.SETTLE, due.RELEASE)
        busy = {step: takeover or gate(step, at) for step in steps}
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
                orphans_before=leadership.since,
                start_suspects=False,  # the pre_probes job does, and never waits on probes
                lag_s=lag_s(),
            )
        if busy[due.SETTLE]:
            settled = settle_returned(session_factory, now=at, settings=settings)
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
            lag_s=lag_s(),
        )

    add("pre_probes", settings.check_interval_s, suspects)
    add("deliver_alerts", settings.delivery_interval_s, deliver_if_due)
    add("collector_alive", settings.alive_tick_s, alive, singleton=False)
    add("trim_heap", heap.TRIM_INTERVAL_S, heap.trim, singleton=False)
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
