"""The background jobs: APScheduler only calls the idempotent steps of the services."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
from apscheduler.events import EVENT_SCHEDULER_SHUTDOWN
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm import Session, sessionmaker

from collector.alerts import delivery as webhooks
from collector.incidents import lifecycle as incidents
from collector.incidents import postmortem
from collector.liveness import heartbeat
from collector.liveness.preprobes import PreProbes
from collector.settings import Settings
from collector.timeutil import utcnow

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
) -> BackgroundScheduler:
    """A scheduler with every job added, not yet started."""
    scheduler = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 30}
    )

    def add(name: str, seconds: float, step: Callable[[], object]) -> None:
        scheduler.add_job(_guarded(name, step), "interval", seconds=seconds, id=name, name=name)

    def deliver() -> None:
        webhooks.deliver_due_alerts(
            session_factory, now=utcnow(), http_client=http_client, settings=settings
        )

    pre_probes = PreProbes()
    scheduler.add_listener(lambda _event: pre_probes.shutdown(), EVENT_SCHEDULER_SHUTDOWN)

    def check() -> None:
        now = utcnow()
        opened = heartbeat.check_heartbeats(
            session_factory, now=now, settings=settings, pre_probes=pre_probes
        )
        settled = incidents.settle_incidents(session_factory, now=now, settings=settings)
        if opened or settled:
            deliver()  # don't wait for the delivery tick: seconds matter here

    add("check_heartbeats", settings.check_interval_s, check)
    # Separate job: check_heartbeats may wait up to a probe deadline for a late host's probes.
    add(
        "pre_probes",
        settings.check_interval_s,
        lambda: heartbeat.start_pre_probes(
            session_factory,
            now=utcnow(),
            settings=settings,
            pre_probes=pre_probes,
            run=heartbeat.prober(settings),
        ),
    )
    add("deliver_alerts", settings.delivery_interval_s, deliver)
    add(
        "collector_alive",
        settings.alive_tick_s,
        lambda: heartbeat.tick_collector_alive(session_factory, run_id=run_id, now=utcnow()),
    )
    add(
        "postmortems",
        settings.postmortem_interval_s,
        lambda: postmortem.collect_postmortems(session_factory, now=utcnow(), settings=settings),
    )
    return scheduler
