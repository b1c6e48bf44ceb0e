"""Recording a matrix step: its row when it starts, its window, outcome and detail at the end."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix.state import RunState
from collector.models import MatrixStep, StepOutcome

log = logging.getLogger(__name__)

# Steps that end the way they end: a halt does not rewrite their outcome.
OWN_OUTCOME = ("stop", "recover", "reboot")


class StepRecord:
    """The outcome and detail a step fills in while it runs."""

    def __init__(self) -> None:
        self.outcome: str = StepOutcome.OK
        self.detail: dict[str, Any] = {}


def label(profile: str, repetition: int) -> str:
    return profile if repetition == 1 else f"{profile} #{repetition}"


class StepRecorder:
    def __init__(
        self, factory: sessionmaker[Session], state: RunState, *, clock: Callable[[], float]
    ) -> None:
        self.factory = factory
        self.state = state
        self.clock = clock

    @contextlib.contextmanager
    def step(self, profile: str, repetition: int, kind: str, name: str) -> Iterator[StepRecord]:
        """Record a step: its row at start, window end, outcome and detail at the end.

        An exception inside is recorded as the step's failure and not re-raised. A step the
        run's halt cut short ends ``host_froze``, ``interrupted`` or ``cancelled``.
        """
        state = self.state
        record = StepRecord()
        with session_scope(self.factory) as session:
            row = MatrixStep(
                run_id=state.run_id,
                profile=profile,
                repetition=repetition,
                kind=kind,
                name=name,
                started_at=self.clock(),
                detail={},
            )
            session.add(row)
            session.flush()
            step_id = state.step_id = row.id
        try:
            yield record
        except Exception as exc:
            log.warning("matrix run %s: %s %s failed: %s", state.run_id, kind, name, exc)
            record.outcome = StepOutcome.FAILED
            record.detail.setdefault("error", f"{type(exc).__name__}: {exc}")
        halted = state.halted()
        if (
            halted is not None
            and kind not in OWN_OUTCOME
            and (halted == StepOutcome.HOST_FROZE or record.outcome != StepOutcome.FAILED)
        ):
            record.outcome = halted
        if record.outcome == StepOutcome.HOST_FROZE:
            record.detail["incident"] = state.freeze_incident
        with session_scope(self.factory) as session:
            done = session.get(MatrixStep, step_id)
            assert done is not None
            done.ended_at = self.clock()
            done.outcome = record.outcome
            done.detail = record.detail
        state.step_id = None
