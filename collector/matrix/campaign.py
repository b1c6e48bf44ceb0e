"""A run as a campaign: its units (repetition x profile, interleaved) in order, through the
host's freezes and the collector's restarts.

Before each unit the host must be up (else the campaign waits for it, like after a freeze);
a unit that froze the host is followed by the next one unless ``abort_on_freeze``. A run taken
over after a restart skips the units already begun: the step that was running is recorded
``interrupted``, the groups its collector left on the host are killed, and the campaign goes
on from the next unit, so no step is ever recorded twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix import durable, hostwatch
from collector.matrix.hostwait import away_reason
from collector.matrix.recorder import label
from collector.matrix.state import RunState
from collector.matrix.steps import ProfileSteps
from collector.matrix.store import record_event
from collector.models import HostStatus, MatrixStep, StepOutcome

log = logging.getLogger(__name__)

# After a collector start hosts are `unknown` for up to a grace: wait this long, quietly.
UNSETTLED = (HostStatus.UNKNOWN, HostStatus.LATE)
QUIET_WAIT_S = 60.0
FAILED_OUTCOMES = (StepOutcome.FAILED, StepOutcome.TIMEOUT)


def run_steps(session: Session, *, run_id: int) -> list[MatrixStep]:
    return list(
        session.scalars(
            select(MatrixStep).where(MatrixStep.run_id == run_id).order_by(MatrixStep.id)
        )
    )


def run_campaign(
    state: RunState, steps: ProfileSteps, *, done: set[tuple[str, int]], save: Callable[[], None]
) -> None:
    """Run every unit not in ``done``; stops early on cancel, shutdown or a failed run."""
    spec = state.spec
    for repetition in range(1, spec.repeat + 1):
        for profile in spec.profiles:
            if (profile, repetition) in done:
                continue
            if state.over():
                return
            if state.freeze.is_set():  # noticed between units: the wait below answers it
                state.recovered()
            if not ensure_host(state, steps, profile, repetition):
                return
            result = steps.run_profile(profile, repetition)
            save()
            if state.over():
                return
            where = label(profile, repetition)
            if result.froze is not None and spec.abort_on_freeze:
                incident = result.froze
                state.fail(
                    f"host {state.host_name} froze during {where} (incident {incident['id']}, "
                    f"{incident['kind']}); abort_on_freeze is set"
                )
                return
            if not result.ok and result.froze is None and spec.abort_on_failure:
                state.fail(f"{where} failed; abort_on_failure is set")
                return


def ensure_host(state: RunState, steps: ProfileSteps, profile: str, repetition: int) -> bool:
    """The host is up before a unit starts; if not, wait for it (a ``recover`` step). A host
    whose agent never sent anything is taken as it is (a matrix without an agent sees no
    telemetry and no freeze)."""
    factory = steps.factory
    deadline = time.monotonic() + QUIET_WAIT_S
    while True:
        with session_scope(factory) as session:
            view = hostwatch.host_view(session, host_id=state.host_id)
        if not view.heard_from:
            return True
        if view.status not in UNSETTLED or time.monotonic() >= deadline or state.over():
            break
        state.cancel.wait(steps.host_wait.poll_s)
    if view.status == HostStatus.UP:
        return True
    if state.over():
        return False
    cold, wait_s = state.spec.cold_start_for(profile), state.spec.freeze_wait_s
    with steps.step(profile, repetition, "recover", "wait for the host") as st:
        st.outcome, waited = steps.host_wait.wait(
            timeout_s=wait_s, settle_s=cold.settle_s, away_since=view.since
        )
        st.detail = {"status": view.status, **waited}
    if st.outcome == StepOutcome.TIMEOUT:
        what = f"(it was {view.status} before {label(profile, repetition)})"
        state.fail(away_reason(state.host_name, what, wait_s, waited))
    return st.outcome == StepOutcome.OK


def resume(
    state: RunState, steps: ProfileSteps, factory: sessionmaker[Session], clock: Callable[[], float]
) -> set[tuple[str, int]]:
    """Take over a run whose collector stopped; the units already begun."""
    with session_scope(factory) as session:
        interrupted = durable.interrupt_open_steps(session, run_id=state.run_id, now=clock())
        existing = run_steps(session, run_id=state.run_id)
        done = {(s.profile, s.repetition) for s in existing}
        last = (existing[-1].profile, existing[-1].repetition) if existing else None
        stopped = last is not None and any(
            (s.profile, s.repetition) == last and s.name == "stop server" for s in existing
        )
        event = {
            "kind": "resumed",
            "at": clock(),
            "interrupted_steps": [{"id": s.id, "unit": label(s.profile, s.repetition),
                                   "step": f"{s.kind}: {s.name}"} for s in interrupted],
        }  # fmt: skip
        record_event(session, run_id=state.run_id, event=event)
    log.warning(
        "matrix run %s: taken over; %d interrupted steps, %d units already begun",
        state.run_id,
        len(interrupted),
        len(done),
    )
    if last is not None and ensure_host(state, steps, *last):
        if not stopped:
            steps.stop_server(*last, None)  # kills the groups left on this boot
        else:
            with session_scope(factory) as session:
                left = durable.take_groups(session, run_id=state.run_id)
                boot_id = hostwatch.host_view(session, host_id=state.host_id).boot_id
            if left:
                steps.ops.kill_left(left, boot_id)
    return done


def failure_reason(steps: list[MatrixStep]) -> str | None:
    """The first failed step in words (and how many more), or None."""
    failed = [s for s in steps if s.outcome in FAILED_OUTCOMES]
    if not failed:
        return None
    first = failed[0]
    error = (first.detail or {}).get("error")
    text = f"{label(first.profile, first.repetition)} {first.kind} ({first.name}): {first.outcome}"
    text += f": {error}" if error else ""
    if len(failed) > 1:
        text += f"; {len(failed) - 1} more failed step(s)"
    return text
