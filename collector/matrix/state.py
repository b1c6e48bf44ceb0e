"""The state of one executing run, shared by its steps, its watcher and the runner.

Three things halt a run's current step: the user's cancel, the collector's shutdown
(``closing``) and a freeze of the host (an incident opened). ``halt`` is set by any of them;
steps and workloads wait on it, and ``halted()`` says which it was.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.matrix.spec import MatrixSpec
from collector.models import StepOutcome
from collector.remote.connect import SSHError, SSHTarget
from collector.remote.process import RemoteProcess

log = logging.getLogger(__name__)


@dataclass
class RunState:
    run_id: int
    spec: MatrixSpec
    host_id: int
    host_name: str
    target: SSHTarget
    direct_url: str | None
    boot: int  # the boot row the server's lines are stored under
    boot_id: str | None  # the host's boot when the current unit started
    requests_path: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)
    freeze: threading.Event = field(default_factory=threading.Event)
    halt: threading.Event = field(default_factory=threading.Event)
    # {"id", "kind", "opened_at"} of the incident that froze the current unit.
    freeze_incident: dict[str, Any] | None = None
    # Incidents already answered (a freeze recovered from, a wait that saw them).
    handled: set[int] = field(default_factory=set)
    processes: set[RemoteProcess] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    unit: tuple[str, int] | None = None  # the (profile, repetition) now running
    step_id: int | None = None  # the step now running
    # pgids whose connections were dropped when the host froze: killed once it is back.
    abandoned: set[int] = field(default_factory=set)
    failed: bool = False
    error: str | None = None  # why the run failed, for the top of its page and report

    def stop(self, event: threading.Event) -> None:
        event.set()
        self.halt.set()

    def halted(self) -> StepOutcome | None:
        """Why the current step must end now, if it must."""
        if self.freeze.is_set():
            return StepOutcome.HOST_FROZE
        if self.closing.is_set():
            return StepOutcome.INTERRUPTED
        if self.cancel.is_set():
            return StepOutcome.CANCELLED
        return None

    def over(self) -> bool:
        """The run goes no further in this process (cancelled, shutting down, failed)."""
        return self.cancel.is_set() or self.closing.is_set() or self.failed

    def froze(self, incident: dict[str, Any]) -> bool:
        """The host froze: halt the unit and drop its connections (a kill would hang). True
        the first time for this unit."""
        with self.lock:
            if self.freeze.is_set():
                return False
            self.freeze_incident = incident
            self.handled.add(int(incident["id"]))
            processes = list(self.processes)
            self.abandoned.update(proc.pgid for proc in processes)
        self.stop(self.freeze)
        for proc in processes:
            proc.abandon()
        return True

    def recovered(self) -> None:
        """The host is back: the next unit runs unless the run was cancelled or is closing."""
        with self.lock:
            self.freeze_incident = None
            self.freeze.clear()
            if not (self.cancel.is_set() or self.closing.is_set()):
                self.halt.clear()

    def fail(self, reason: str) -> None:
        if not self.failed:
            self.failed, self.error = True, reason

    def kill_all(self) -> None:
        """Kill every remote process group this run started and still has (a frozen host's
        groups are abandoned instead: see ``froze``)."""
        if self.freeze.is_set():
            return
        with self.lock:
            processes = list(self.processes)
        for proc in processes:
            if proc.running:
                try:
                    proc.kill_group()
                except SSHError as exc:
                    log.warning("matrix run %s: %s", self.run_id, exc)
