"""Cron schedules of matrix specs (soak runs): APScheduler jobs that queue a run per firing;
and the job that has the runner pick up runs whose collector stopped."""

from __future__ import annotations

import logging

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix import store
from collector.matrix.runner import MatrixRunner

log = logging.getLogger(__name__)


def fire_schedule(
    factory: sessionmaker[Session], runner: MatrixRunner, schedule_id: int
) -> int | None:
    """One firing: queue a run of the schedule (skipped while its last run is active, and in
    a replica that does not lead: the leader fires it)."""
    if not runner.leading():
        return None
    with session_scope(factory) as session:
        run = store.enqueue_scheduled(session, schedule_id=schedule_id)
        run_id = run.id if run is not None else None
    if run_id is None:
        log.info("matrix schedule %s: previous run still active, skipped", schedule_id)
        return None
    runner.submit(run_id)
    log.info("matrix schedule %s queued run %s", schedule_id, run_id)
    return run_id


def schedule_job(
    scheduler: BaseScheduler,
    factory: sessionmaker[Session],
    runner: MatrixRunner,
    schedule_id: int,
    cron: str,
) -> None:
    scheduler.add_job(
        fire_schedule,
        CronTrigger.from_crontab(cron),
        args=(factory, runner, schedule_id),
        id=f"matrix-schedule-{schedule_id}",
        replace_existing=True,
        max_instances=1,
        coalesce=True,
    )


def register_matrix_schedules(
    scheduler: BaseScheduler, factory: sessionmaker[Session], runner: MatrixRunner
) -> int:
    """Add a cron job for every enabled stored schedule not registered yet (one made through
    another replica's API); how many were added."""
    with session_scope(factory) as session:
        schedules = [(s.id, s.cron) for s in store.list_schedules(session)]
    added = 0
    for schedule_id, cron in schedules:
        if scheduler.get_job(f"matrix-schedule-{schedule_id}") is None:
            schedule_job(scheduler, factory, runner, schedule_id, cron)
            added += 1
    return added


def register_pickup(
    scheduler: BaseScheduler,
    factory: sessionmaker[Session],
    runner: MatrixRunner,
    *,
    every_s: float,
) -> None:
    """Every ``every_s``: queued runs and runs nobody drives (an expired lease) get a worker,
    and schedules stored by another replica get their cron job."""

    def pick_up() -> None:
        runner.pick_up_work()
        register_matrix_schedules(scheduler, factory, runner)

    scheduler.add_job(
        pick_up,
        "interval",
        seconds=every_s,
        id="matrix-pickup",
        replace_existing=True,
        max_instances=1,
        coalesce=True,
    )
