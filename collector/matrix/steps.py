"""One profile x repetition of a run (a unit), step by step, on the host over SSH.

Reboot the host when the spec asks for a cold boot, stop/remove the previous server, start this
one in its own process group (its output streamed into the store as ``source="vllm"`` lines
tagged with run/profile), wait for ``/health`` through an SSH port-forward, run each workload,
stop the server. When the host freezes the running step ends ``host_froze`` at once, the unit
waits for the host to come back (a ``recover`` step) and then stops what is left. Every step is
recorded with its window and outcome; an exception inside a step is its failure, never the
run's.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from collector.db import session_scope
from collector.matrix import durable, hostwatch
from collector.matrix.argv import remote_argv, served_model, stop_argv
from collector.matrix.hoststeps import HostSteps
from collector.matrix.hostwait import HostWait
from collector.matrix.line_sink import LineSink
from collector.matrix.recorder import StepRecorder
from collector.matrix.remote_ops import HostOps
from collector.matrix.spec import CommandWorkloadSpec, ToolConversationSpec
from collector.matrix.workload import ToolConversation
from collector.models import StepOutcome
from collector.remote.process import RemoteProcess

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 120.0


@dataclass
class UnitResult:
    ok: bool
    froze: dict[str, Any] | None = None


class ProfileSteps:
    """Runs the units of one run; ``run_profile`` is one profile x repetition."""

    def __init__(self, ops: HostOps) -> None:
        """``ops`` carries the run's database, state, SSH layer and clock."""
        self.ops = ops
        self.factory, self.state, self.clock = ops.factory, ops.state, ops.clock
        recorder = StepRecorder(ops.factory, ops.state, clock=ops.clock)
        self.step = recorder.step
        self.host_wait = HostWait(ops)
        self.host = HostSteps(recorder, ops, self.host_wait)

    # -- one unit ---------------------------------------------------------------------------
    def run_profile(self, profile: str, repetition: int) -> UnitResult:
        """One profile x repetition; ``ok`` False when a step failed."""
        state, spec = self.state, self.state.spec
        cold = spec.cold_start_for(profile)
        state.unit = (profile, repetition)
        if spec.reboots(profile, repetition) and not self.host.reboot(profile, repetition, cold):
            return UnitResult(ok=False)
        self.host.refresh_boot()
        ok = True
        if cold.enabled and (argv := stop_argv(spec)) and state.halted() is None:
            with self.step(profile, repetition, "stop", "remove previous server") as st:
                st.detail = self.ops.run(argv, STOP_TIMEOUT_S)
        if cold.enabled and cold.drop_caches and state.halted() is None:
            with self.step(profile, repetition, "stop", "drop caches") as st:
                st.detail = self.ops.run(cold.drop_caches_argv, 60.0)
                if st.detail["exit_status"] != 0:
                    st.outcome = StepOutcome.FAILED
            ok = st.outcome == StepOutcome.OK
        tags = {"matrix_run": state.run_id, "profile": profile, "repetition": repetition}
        sink = LineSink(
            self.factory, host_id=state.host_id, boot=state.boot, tags=tags, clock=self.clock
        )
        server: RemoteProcess | None = None
        froze: dict[str, Any] | None = None
        try:
            if state.halted() is None:
                with self.step(profile, repetition, "start", "start server") as st:
                    argv = remote_argv(spec, profile)
                    st.detail = {"argv": argv}
                    server = self.ops.start(argv, sink.callback("stdout"), sink.callback("stderr"))
                    st.detail["pgid"] = server.pgid
            ok = server is not None and self._serve(profile, repetition, server, tags) and ok
        finally:
            state.unit = None  # a freeze from here on is the next unit's wait for the host
            froze = state.freeze_incident
            if froze is not None:
                self.host.recover(profile, repetition, cold)
            # A host that stayed away keeps its groups on record; one that answers SSH (only
            # its agent stayed away) has them killed now, so the failed run leaves no orphan.
            if state.freeze.is_set() and not (state.failed and self.ops.ssh_answers()):
                if server is not None:
                    self.ops.end(server)
            else:
                self.stop_server(profile, repetition, server)
            sink.close()
        return UnitResult(ok=ok, froze=froze)

    def _serve(
        self, profile: str, repetition: int, server: RemoteProcess, tags: dict[str, Any]
    ) -> bool:
        """/health, then each workload; False when one of them failed."""
        state = self.state
        with contextlib.ExitStack() as forward:
            with self.step(profile, repetition, "health", "wait for /health") as st:
                base_url = forward.enter_context(self.ops.forward())
                st.outcome, st.detail = self.ops.wait_healthy(server, base_url)
            if st.outcome != StepOutcome.OK:
                return False
            ok = True
            for workload in state.spec.workloads:
                if state.halted() is not None:
                    break
                with self.step(profile, repetition, "workload", workload.name) as st:
                    st.detail = self._workload(workload, base_url, tags)
                    st.outcome = st.detail.get("outcome", StepOutcome.FAILED)
                ok = ok and st.outcome == StepOutcome.OK
            return ok

    def _workload(
        self,
        workload: ToolConversationSpec | CommandWorkloadSpec,
        base_url: str,
        tags: dict[str, Any],
    ) -> dict[str, Any]:
        state = self.state
        if isinstance(workload, CommandWorkloadSpec):
            return self.ops.command_workload(workload)
        model = workload.model or served_model(state.spec) or "default"
        result = ToolConversation(
            workload,
            base_url=workload.base_url or base_url,
            model=model,
            jsonl_path=state.requests_path,
            cancel=state.halt,
            freeze=state.freeze,
            tags={"run_id": state.run_id, **tags},
            clock=self.clock,
        ).run()
        return result.figures()

    def stop_server(self, profile: str, repetition: int, server: RemoteProcess | None) -> None:
        """Kill the server's group (or, after a freeze, the groups left on this boot) and
        remove its container."""
        state = self.state
        with self.step(profile, repetition, "stop", "stop server") as st:
            if server is not None:
                if server.running and server.pgid not in state.abandoned:
                    server.kill_group()
                self.ops.end(server)
                st.detail["exit_status"] = server.exit_status
            with session_scope(self.factory) as session:
                left = durable.take_groups(session, run_id=state.run_id)
                boot_id = hostwatch.host_view(session, host_id=state.host_id).boot_id
            if left:
                st.detail["left_groups"] = self.ops.kill_left(left, boot_id)
            state.abandoned.clear()
            if argv := stop_argv(state.spec):
                st.detail["remove"] = self.ops.run(argv, STOP_TIMEOUT_S)
