"""Waiting for a campaign's host to come back: after a reboot it asked for, after a freeze.

The host is back when liveness says ``up`` (on a new boot, when a reboot was asked for), it
stayed up for ``settle_s`` and it answers SSH. A host away for the power hook's ``after_s``
is power-cycled, once per wait. Every incident seen while waiting is marked handled, so the
freeze watcher does not take it for a new freeze.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from collector.db import session_scope
from collector.matrix import hostwatch
from collector.matrix.power import power_control, power_cycle
from collector.matrix.remote_ops import HostOps
from collector.models import SILENT_KINDS, HostStatus, StepOutcome

log = logging.getLogger(__name__)


class HostWait:
    def __init__(self, ops: HostOps) -> None:
        self.ops = ops
        self.factory, self.state, self.clock, self.poll_s = (
            ops.factory,
            ops.state,
            ops.clock,
            ops.poll_s,
        )

    def wait(
        self,
        *,
        timeout_s: float,
        settle_s: float,
        away_since: float,
        incident_id: int | None = None,
        new_boot_of: str | None = None,
    ) -> tuple[StepOutcome, dict[str, Any]]:
        """Wait for the host; (outcome, detail) where detail has ``waited_s``, ``boot_id``,
        ``incidents`` seen and ``power_cycles`` used."""
        state = self.state
        with session_scope(self.factory) as session:
            control = power_control(session, host_id=state.host_id)
        detail: dict[str, Any] = {"incidents": [], "power_cycles": []}
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        while True:
            detail["waited_s"] = round(time.monotonic() - t0, 3)
            if state.cancel.is_set():
                return StepOutcome.CANCELLED, detail
            if state.closing.is_set():
                return StepOutcome.INTERRUPTED, detail
            now = self.clock()
            with session_scope(self.factory) as session:
                view = hostwatch.host_view(session, host_id=state.host_id)
                for incident in hostwatch.incidents_since(
                    session, host_id=state.host_id, since=away_since - 1.0
                ):
                    if incident.id not in detail["incidents"]:
                        detail["incidents"].append(incident.id)
                        state.handled.add(incident.id)
                    if incident_id is None and incident.kind not in SILENT_KINDS:
                        incident_id = incident.id
            detail["boot_id"] = view.boot_id
            back = view.status == HostStatus.UP and (
                new_boot_of is None or view.boot_id != new_boot_of
            )
            if back:
                up_since = view.since
                if new_boot_of is not None and view.boot_seen is not None:
                    up_since = max(up_since, view.boot_seen)
                if now - up_since >= settle_s and self.ops.ssh_answers():
                    detail["back_at"] = up_since
                    return StepOutcome.OK, detail
            elif control is not None and not detail["power_cycles"]:
                away_s = now - away_since
                if away_s >= control.after_s:
                    entry = power_cycle(
                        self.factory,
                        run_id=state.run_id,
                        host_name=state.host_name,
                        control=control,
                        incident_id=incident_id,
                        away_s=away_s,
                        clock=self.clock,
                    )
                    detail["power_cycles"].append(entry)
            if time.monotonic() >= deadline:
                return StepOutcome.TIMEOUT, detail
            state.cancel.wait(self.poll_s)


def away_reason(host: str, what: str, timeout_s: float, detail: dict[str, Any]) -> str:
    """Why the run ends: the host stayed away (and what was tried)."""
    reason = f"host {host} did not come back within {timeout_s:g} s {what}"
    cycles = detail.get("power_cycles") or []
    if cycles:
        used = cycles[0]
        reason += (
            f"; power-cycled once after {used['away_s']:g} s away "
            f"({' '.join(used['argv'])}: exit status {used.get('exit_status')})"
        )
    return reason
