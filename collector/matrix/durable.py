"""A run's progress that outlives the collector process driving it.

- **Lease**: only the collector holding an unexpired lease drives a run; it renews it while it
  runs. A run left ``running`` with an expired (or no) lease lost its collector (kill -9, a
  crash, a SIGTERM that released it) and is taken over by the next claim.
- **Remote groups**: every process group started on the host is recorded until it ends, with
  the boot it runs in, so a collector taking over kills what its predecessor left running.
- **Events**: what happened beyond the steps (freezes, power cycles, resumes).

Claims are conditional UPDATEs under the host's row lock: two collectors never drive the same
run, nor two runs of one host at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from collector import db
from collector.models import Host, MatrixRun, MatrixStep, RunStatus, StepOutcome


def _orphaned(now: datetime) -> Any:
    return (MatrixRun.status == RunStatus.RUNNING) & or_(
        MatrixRun.lease_until.is_(None), MatrixRun.lease_until < now
    )


def claim_next(
    session: Session, *, host_id: int, owner: str, now: datetime, lease_s: float
) -> tuple[int, bool] | None:
    """(run id, taken over) of the host's next run for ``owner``: a running run whose lease
    expired, else the oldest queued one; None while another collector drives one of the
    host's runs."""
    host = session.get(Host, host_id)
    if host is None:
        return None
    db.lock_for_update(session, host)
    until = now + timedelta(seconds=lease_s)
    busy = session.scalar(
        select(MatrixRun.id).where(
            MatrixRun.host_id == host_id,
            MatrixRun.status == RunStatus.RUNNING,
            MatrixRun.lease_until >= now,
        )
    )
    if busy is not None:
        return None
    for resume, where in ((True, _orphaned(now)), (False, MatrixRun.status == RunStatus.QUEUED)):
        ids = session.scalars(
            select(MatrixRun.id).where(MatrixRun.host_id == host_id, where).order_by(MatrixRun.id)
        ).all()
        for run_id in ids:
            values: dict[str, Any] = {"lease_owner": owner, "lease_until": until}
            if not resume:
                values |= {"status": RunStatus.RUNNING, "started_at": now}
            claimed = db.changed_rows(
                session,
                update(MatrixRun)
                .where(MatrixRun.id == run_id, where)
                .values(**values)
                .execution_options(synchronize_session=False),
            )
            if claimed == 1:
                return run_id, resume
    return None


def hosts_with_work(session: Session, *, now: datetime) -> list[int]:
    """Hosts with a queued run or a running run nobody drives."""
    where = (MatrixRun.status == RunStatus.QUEUED) | _orphaned(now)
    return list(session.scalars(select(MatrixRun.host_id).where(where).distinct()))


def renew_lease(
    session: Session, *, run_id: int, owner: str, now: datetime, lease_s: float
) -> bool:
    """Extend our lease; False when the run is no longer ours to drive."""
    result = db.changed_rows(
        session,
        update(MatrixRun)
        .where(
            MatrixRun.id == run_id,
            MatrixRun.lease_owner == owner,
            MatrixRun.status == RunStatus.RUNNING,
        )
        .values(lease_until=now + timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False),
    )
    return result == 1


def release_lease(session: Session, *, run_id: int, owner: str) -> None:
    """Let go of a run that is still ``running`` (collector shutdown): the next collector
    process takes it over at once."""
    session.execute(
        update(MatrixRun)
        .where(MatrixRun.id == run_id, MatrixRun.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
        .execution_options(synchronize_session=False)
    )


def add_group(
    session: Session, *, run_id: int, pgid: int, boot_id: str | None, step_id: int | None
) -> None:
    run = session.get(MatrixRun, run_id, with_for_update=db.is_postgres(session))
    if run is not None:
        entry = {"pgid": pgid, "boot_id": boot_id, "step_id": step_id}
        run.remote_groups = [*(run.remote_groups or []), entry]


def drop_group(session: Session, *, run_id: int, pgid: int) -> None:
    run = session.get(MatrixRun, run_id, with_for_update=db.is_postgres(session))
    if run is not None:
        run.remote_groups = [g for g in run.remote_groups or [] if g["pgid"] != pgid]


def take_groups(session: Session, *, run_id: int) -> list[dict[str, Any]]:
    """The groups a previous driver left, removed from the run (the caller kills them)."""
    run = session.get(MatrixRun, run_id)
    groups = list(run.remote_groups or []) if run is not None else []
    if run is not None:
        run.remote_groups = []
    return groups


def interrupt_open_steps(session: Session, *, run_id: int, now: float) -> list[MatrixStep]:
    """Steps a previous driver never finished: ended now as ``interrupted``."""
    steps = list(
        session.scalars(
            select(MatrixStep)
            .where(MatrixStep.run_id == run_id, MatrixStep.ended_at.is_(None))
            .order_by(MatrixStep.id)
        )
    )
    for step in steps:
        step.ended_at = now
        step.outcome = StepOutcome.INTERRUPTED
        step.detail = {**(step.detail or {}), "error": "the collector driving the run stopped"}
    return steps
