"""The steps of a campaign where the host itself goes away: a reboot the collector asks for
(a planned silence: no alert), and the wait for the host after it froze."""

from __future__ import annotations

import logging
from datetime import timedelta

from collector.db import session_scope
from collector.hosts.registry import current_boot_pk
from collector.liveness.planned import clear_reboot, expect_reboot
from collector.matrix import hostwatch
from collector.matrix.hostwait import HostWait, away_reason
from collector.matrix.recorder import StepRecorder, label
from collector.matrix.remote_ops import HostOps
from collector.matrix.spec import ColdStart
from collector.matrix.store import record_event
from collector.models import Host, StepOutcome
from collector.remote.connect import SSHError
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)

REBOOT_COMMAND_TIMEOUT_S = 30.0


class HostSteps:
    def __init__(self, recorder: StepRecorder, ops: HostOps, host_wait: HostWait) -> None:
        self.factory, self.state, self.clock = ops.factory, ops.state, ops.clock
        self.step = recorder.step
        self.ops = ops
        self.host_wait = host_wait

    def refresh_boot(self) -> None:
        """The unit starts on the host's current boot: its lines are stored under it."""
        state = self.state
        with session_scope(self.factory) as session:
            host = session.get(Host, state.host_id)
            assert host is not None
            state.boot_id, state.boot = host.current_boot_id, current_boot_pk(session, host=host)

    def reboot(self, profile: str, repetition: int, cold: ColdStart) -> bool:
        """Reboot the host (a planned silence: no alert) and wait for its new boot."""
        state = self.state
        with self.step(profile, repetition, "reboot", "reboot host") as st:
            requested = self.clock()
            until = from_epoch(requested) + timedelta(
                seconds=cold.reboot_timeout_s + cold.settle_s + 60
            )
            with session_scope(self.factory) as session:
                host = session.get(Host, state.host_id)
                assert host is not None
                old = host.current_boot_id
                reason = f"matrix run {state.run_id}: cold boot of {label(profile, repetition)}"
                expect_reboot(session, host=host, now=from_epoch(requested), until=until,
                              reason=reason)  # fmt: skip
            st.detail = {"argv": list(cold.reboot_argv), "from_boot_id": old}
            try:
                sent = self.ops.run(cold.reboot_argv, REBOOT_COMMAND_TIMEOUT_S)
            except SSHError as exc:  # the connection may die with the host: that is the point
                sent = {"error": str(exc)}
            st.detail["command"] = sent
            if sent.get("exit_status") not in (None, 0):
                st.outcome = StepOutcome.FAILED
                st.detail["error"] = (
                    f"reboot command exited {sent['exit_status']}: {sent['stderr_tail'].strip()}"
                )
                state.fail(f"cannot reboot host {state.host_name}: {st.detail['error']}")
            else:
                st.outcome, waited = self.host_wait.wait(
                    timeout_s=cold.reboot_timeout_s,
                    settle_s=cold.settle_s,
                    away_since=requested,
                    new_boot_of=old,
                )
                st.detail.update(waited)
                st.detail["to_boot_id"] = waited.get("boot_id")
                st.detail["boot_s"] = self._boot_s(requested, waited.get("boot_id"), old)
                if st.outcome == StepOutcome.TIMEOUT:
                    what = "after the reboot the collector asked for"
                    state.fail(away_reason(state.host_name, what, cold.reboot_timeout_s, waited))
            with session_scope(self.factory) as session:
                clear_reboot(session, host_id=state.host_id)
        return st.outcome == StepOutcome.OK

    def _boot_s(self, requested: float, boot_id: str | None, old: str | None) -> float | None:
        """From the reboot command to the new boot's first heartbeat."""
        if boot_id is None or boot_id == old:
            return None
        with session_scope(self.factory) as session:
            seen = hostwatch.host_view(session, host_id=self.state.host_id).boot_seen
        return None if seen is None else round(seen - requested, 3)

    def recover(self, profile: str, repetition: int, cold: ColdStart) -> None:
        """The host froze during this unit: wait for it to come back (or fail the run)."""
        state = self.state
        incident = state.freeze_incident
        assert incident is not None
        wait_s = state.spec.freeze_wait_s
        with self.step(profile, repetition, "recover", "wait for the host to come back") as st:
            st.outcome, waited = self.host_wait.wait(
                timeout_s=wait_s,
                settle_s=cold.settle_s,
                away_since=incident["silent_since"] or incident["opened_at"],
                incident_id=incident["id"],
            )
            st.detail = {"incident": incident, **waited}
        event = {"kind": "freeze", "at": self.clock(), "unit": label(profile, repetition),
                 "incident": incident, "outcome": st.outcome}  # fmt: skip
        with session_scope(self.factory) as session:
            record_event(session, run_id=state.run_id, event=event)
        if st.outcome == StepOutcome.OK:
            state.recovered()
        elif st.outcome == StepOutcome.TIMEOUT:
            what = f"after it froze (incident {incident['id']}, {incident['kind']})"
            state.fail(away_reason(state.host_name, what, wait_s, waited))
