"""Matrix runs in the store: create, claim, cancel, steps, restart recovery, schedules.

The database is the work queue: a worker claims a run with a conditional
`UPDATE ... WHERE status = 'queued'`, so two workers never start the same run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from collector.errors import BadRequest, Conflict, NotFound, Unprocessable
from collector.hosts.registry import get_host
from collector.matrix.argv import stop_argv
from collector.matrix.collect import build_report
from collector.matrix.report import render_json
from collector.matrix.spec import MatrixSpec
from collector.models import ACTIVE_RUNS, Host, MatrixRun, MatrixSchedule, MatrixStep, RunStatus
from collector.remote.targets import require_ssh_target
from collector.schemas import OutModel
from collector.timeutil import to_epoch


def require_runnable(session: Session, *, spec: MatrixSpec) -> Host:
    """The spec's host, able to run it: registered (else 404), with SSH settings and a
    trusted host key (else 422 saying how to add them)."""
    host = get_host(session, name=spec.host)
    try:
        require_ssh_target(host)
    except BadRequest as exc:
        raise Unprocessable(exc.detail) from None
    if not host.ssh_host_key:
        raise Unprocessable(
            f"host {host.name!r} has no trusted SSH host key: run `freezewatch-collector "
            f"add-host {host.name} --update --trust-host-key` (or PATCH /api/v1/hosts/"
            f'{host.name} {{"trust_host_key": true}})'
        )
    return host


def create_run(
    session: Session,
    *,
    spec: MatrixSpec,
    preset: str | None = None,
    schedule_id: int | None = None,
) -> MatrixRun:
    """Queue a run of a validated spec on its (registered) host."""
    host = get_host(session, name=spec.host)
    run = MatrixRun(
        name=spec.name,
        host_id=host.id,
        spec=spec.model_dump(mode="json"),
        preset=preset,
        status=RunStatus.QUEUED,
        schedule_id=schedule_id,
    )
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, *, run_id: int) -> MatrixRun:
    run = session.get(MatrixRun, run_id)
    if run is None:
        raise NotFound(f"no matrix run {run_id}")
    return run


def list_runs(session: Session, *, limit: int = 100) -> list[MatrixRun]:
    return list(session.scalars(select(MatrixRun).order_by(MatrixRun.id.desc()).limit(limit)))


def list_steps(session: Session, *, run_id: int) -> list[MatrixStep]:
    return list(
        session.scalars(
            select(MatrixStep).where(MatrixStep.run_id == run_id).order_by(MatrixStep.id)
        )
    )


def request_cancel(session: Session, *, run_id: int, now: datetime) -> MatrixRun:
    """Flag a run for cancellation; a queued run is cancelled at once, a running one by its
    runner at the next check. Cancelling a finished run is a conflict."""
    run = get_run(session, run_id=run_id)
    if run.status not in ACTIVE_RUNS:
        raise Conflict(f"matrix run {run_id} already {run.status}")
    run.cancel_requested = True
    session.execute(
        update(MatrixRun)
        .where(MatrixRun.id == run_id, MatrixRun.status == RunStatus.QUEUED)
        .values(status=RunStatus.CANCELLED, ended_at=now)
    )
    session.flush()
    session.refresh(run)
    return run


def cancel_requested(session: Session, *, run_id: int) -> bool:
    return bool(session.scalar(select(MatrixRun.cancel_requested).where(MatrixRun.id == run_id)))


def finish_run(
    session: Session,
    *,
    run_id: int,
    status: RunStatus,
    report: dict[str, Any] | None,
    now: datetime,
    error: str | None = None,
) -> None:
    run = get_run(session, run_id=run_id)
    run.status = status
    run.ended_at = now
    run.report = report
    run.error = error
    run.lease_owner = run.lease_until = None
    session.flush()


def record_event(session: Session, *, run_id: int, event: dict[str, Any]) -> None:
    """Append to the run's campaign events (freezes, power cycles, resumes)."""
    run = get_run(session, run_id=run_id)
    run.events = [*(run.events or []), event]
    session.flush()


def save_schedule(session: Session, *, spec: MatrixSpec, preset: str | None) -> MatrixSchedule:
    """Create or replace the schedule named like the spec (a spec with `schedule`)."""
    assert spec.schedule is not None
    host = get_host(session, name=spec.host)
    schedule = session.scalar(select(MatrixSchedule).where(MatrixSchedule.name == spec.name))
    if schedule is None:
        schedule = MatrixSchedule(name=spec.name, host_id=host.id, cron=spec.schedule, spec={})
        session.add(schedule)
    schedule.host_id = host.id
    schedule.cron = spec.schedule
    schedule.spec = spec.model_dump(mode="json")
    schedule.preset = preset
    schedule.enabled = True
    session.flush()
    return schedule


def list_schedules(session: Session) -> list[MatrixSchedule]:
    return list(session.scalars(select(MatrixSchedule).where(MatrixSchedule.enabled)))


def enqueue_scheduled(session: Session, *, schedule_id: int) -> MatrixRun | None:
    """A cron firing: queue a run of the schedule's spec unless one is still queued/running."""
    schedule = session.get(MatrixSchedule, schedule_id)
    if schedule is None or not schedule.enabled:
        return None
    busy = session.scalar(
        select(MatrixRun.id).where(
            MatrixRun.schedule_id == schedule_id, MatrixRun.status.in_(ACTIVE_RUNS)
        )
    )
    if busy is not None:
        return None
    spec = MatrixSpec.model_validate(schedule.spec)
    return create_run(session, spec=spec, preset=schedule.preset, schedule_id=schedule_id)


class LeaseOut(OutModel):
    """Which collector process drives the run, and until when its lease holds."""

    owner: str
    until: float | None


class RunSummary(OutModel):
    """A matrix run: its spec's name and host, lifecycle instants, how it ended."""

    id: int
    name: str
    host: str | None
    preset: str | None
    status: RunStatus
    created_at: float
    started_at: float | None
    ended_at: float | None
    cancel_requested: bool
    error: str | None
    schedule_id: int | None
    # What happened to the campaign beyond its steps: freezes, power cycles, resumes.
    events: list[dict[str, Any]]
    # The collector process driving the run, while one does.
    lease: LeaseOut | None

    @classmethod
    def of(cls, run: MatrixRun, host: Host | None = None) -> RunSummary:
        return cls.model_validate(
            {
                "id": run.id,
                "name": run.name,
                "host": host.name if host is not None else run.spec.get("host"),
                "preset": run.preset,
                "status": run.status,
                "created_at": to_epoch(run.created_at),
                "started_at": to_epoch(run.started_at),
                "ended_at": to_epoch(run.ended_at),
                "cancel_requested": run.cancel_requested,
                "error": run.error,
                "schedule_id": run.schedule_id,
                "events": run.events or [],
                "lease": {"owner": run.lease_owner, "until": to_epoch(run.lease_until)}
                if run.lease_owner
                else None,
            }
        )


class StepOut(OutModel):
    """One recorded step of a run (stop, start, health, a workload, ...); epoch seconds."""

    profile: str
    repetition: int
    kind: str
    name: str
    started_at: float
    ended_at: float | None
    outcome: str | None
    detail: dict[str, Any]


class Progress(OutModel):
    """Steps ended (``done``) of those planned (``total``, never below ``done``)."""

    done: int
    total: int


def planned_steps(spec: MatrixSpec) -> int:
    """How many steps the runner records for the spec when nothing fails or freezes (see
    `ProfileSteps.run_profile`): a reboot, cold-start stops, start, health, workloads, stop."""
    total = 0
    for profile in spec.profiles:
        cold = spec.cold_start_for(profile)
        per_unit = 3 + len(spec.workloads)
        per_unit += bool(cold.enabled and stop_argv(spec)) + bool(cold.enabled and cold.drop_caches)
        total += sum(per_unit + spec.reboots(profile, rep) for rep in range(1, spec.repeat + 1))
    return total


def progress(session: Session, runs: list[MatrixRun]) -> dict[int, Progress]:
    """Per run id: its progress."""
    if not runs:
        return {}
    done = dict(
        session.execute(
            select(MatrixStep.run_id, func.count(MatrixStep.ended_at))
            .where(MatrixStep.run_id.in_([r.id for r in runs]))
            .group_by(MatrixStep.run_id)
        ).all()
    )
    out = {}
    for run in runs:
        try:
            total = planned_steps(MatrixSpec.model_validate(run.spec))
        except ValueError:  # a spec stored by an older version: count what is there
            total = 0
        ended = int(done.get(run.id, 0))
        out[run.id] = Progress.model_validate({"done": ended, "total": max(total, ended)})
    return out


def run_report(session: Session, *, run: MatrixRun) -> dict[str, Any]:
    """The stored report, or one built now for a run still going."""
    if run.report is not None and run.status not in ACTIVE_RUNS:
        return run.report
    return render_json(build_report(session, run_id=run.id))
