"""Matrix specs with a cron `schedule`: stored, registered as cron jobs, each firing queues one
run (none while the previous one is still active)."""

from __future__ import annotations

import time
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from collector import db
from collector.matrix.presets import get_preset
from collector.matrix.schedule import fire_schedule, register_matrix_schedules
from collector.models import Host, MatrixRun, MatrixSchedule
from tests.collector.conftest import Collector


class RecordingRunner:
    def __init__(self, *, lead: bool = True) -> None:
        self.submitted: list[int] = []
        self.lead = lead

    def submit(self, run_id: int) -> None:
        self.submitted.append(run_id)

    def leading(self) -> bool:
        return self.lead


def test_scheduled_spec_fires_runs_on_its_cron(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    c.add_host("spark-01")
    with db.session_scope(c.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        host = session.query(Host).one()
        host.ssh_user, host.ssh_host, host.ssh_host_key = "root", "10.0.0.21", "ssh-ed25519 AAAA"
    spec: dict[str, Any] = get_preset("nemoclaw-spark-qwen", "spark-01").model_dump(mode="json")
    spec.update(name="nightly-soak", schedule="30 3 * * *")
    created = c.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=c.admin)
    assert created.status_code == 201, created.text

    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        (schedule,) = session.query(MatrixSchedule).all()
        assert (schedule.name, schedule.cron, schedule.enabled) == (
            "nightly-soak",
            "30 3 * * *",
            True,
        )
        schedule_id = schedule.id

    scheduler = BackgroundScheduler()
    runner = RecordingRunner()
    assert register_matrix_schedules(scheduler, factory, runner) == 1
    assert register_matrix_schedules(scheduler, factory, runner) == 0  # the periodic re-sync
    (job,) = scheduler.get_jobs()
    assert isinstance(job.trigger, CronTrigger)
    assert str(job.trigger) == str(CronTrigger.from_crontab("30 3 * * *"))

    # The run the POST started fails without connecting (its host key is no key), step by step
    # (~6 s here, several times that on a loaded machine); wait for that.
    url = f"/api/v1/matrix-runs/{created.json()['id']}"
    deadline = time.monotonic() + 180
    while c.client.get(url, headers=c.admin).json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the POSTed run did not end"
        time.sleep(0.05)
    standby = RecordingRunner(lead=False)  # a replica that does not lead fires nothing
    assert fire_schedule(factory, standby, schedule_id) is None and standby.submitted == []
    first = fire_schedule(factory, runner, schedule_id)
    assert first is not None and runner.submitted == [first]
    assert fire_schedule(factory, runner, schedule_id) is None  # the first is still queued
    with db.session_scope(factory) as session:
        run = session.get(MatrixRun, first)
        assert run is not None
        assert (run.status, run.schedule_id, run.spec["name"]) == (
            "queued",
            schedule_id,
            "nightly-soak",
        )
