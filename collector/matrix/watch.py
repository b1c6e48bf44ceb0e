"""A running run's watcher thread: the stored cancel flag, the host's incidents, the lease.

Every ``poll_s`` it turns a cancel requested by any collector process into the run's cancel,
an incident that opened on the host during a unit into a freeze (the unit's step ends
``host_froze`` at once, its connections are dropped), and renews the run's lease; a lease
that could not be renewed means another collector took the run over: this one stops driving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix import durable, hostwatch, store
from collector.matrix.state import RunState
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)


class RunWatcher:
    def __init__(
        self,
        factory: sessionmaker[Session],
        state: RunState,
        *,
        owner: str,
        lease_s: float,
        poll_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.factory = factory
        self.state = state
        self.owner = owner
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.clock = clock
        self.since = clock()  # incidents opened before this execution are not its freezes
        self.lost_lease = False
        self._renew_every = max(poll_s, lease_s / 3)
        self._next_renew = time.monotonic() + self._renew_every
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"matrix-watch-{state.run_id}", daemon=True
        )

    def start(self) -> RunWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.tick()
            except Exception:
                log.exception("matrix run %s: watch failed", self.state.run_id)

    def tick(self) -> None:
        """One look at the database (callable from a test)."""
        state = self.state
        freeze: dict[str, Any] | None = None
        renew = time.monotonic() >= self._next_renew
        with session_scope(self.factory) as session:
            cancel = store.cancel_requested(session, run_id=state.run_id)
            unit = state.unit
            if unit is not None and not state.freeze.is_set():
                incident = hostwatch.new_freeze(
                    session, host_id=state.host_id, since=self.since, handled=state.handled
                )
                if incident is not None:
                    freeze = hostwatch.brief(incident)
                    context = {"run_id": state.run_id, "profile": unit[0], "repetition": unit[1],
                               "step_id": state.step_id}  # fmt: skip
                    hostwatch.note_matrix_unit(session, incident_id=incident.id, unit=context)
            if renew:
                now = from_epoch(self.clock())
                kept = durable.renew_lease(
                    session, run_id=state.run_id, owner=self.owner, now=now, lease_s=self.lease_s
                )
                self._next_renew = time.monotonic() + self._renew_every
        if freeze is not None and state.froze(freeze):
            log.warning(
                "matrix run %s: host %s froze (incident %s, %s) during %s",
                state.run_id,
                state.host_name,
                freeze["id"],
                freeze["kind"],
                unit,
            )
        if cancel and not state.cancel.is_set():
            state.stop(state.cancel)
            state.kill_all()
        if renew and not kept:
            log.warning("matrix run %s: lease lost to another collector", state.run_id)
            self.lost_lease = True
            state.stop(state.closing)
