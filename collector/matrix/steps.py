"""One profile x repetition of a run, step by step, on the host over SSH.

Stop/remove the previous server, start this one in its own process group (its output streamed
into the store as ``source="vllm"`` lines tagged with run/profile), wait for ``/health``
through an SSH port-forward, run each workload, stop the server. Every step is recorded with
its window and outcome; an exception inside a step is its failure, never the run's.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix.argv import remote_argv, served_model, stop_argv
from collector.matrix.command import summarize_command_result
from collector.matrix.line_sink import LineSink
from collector.matrix.spec import CommandWorkloadSpec, MatrixSpec, ToolConversationSpec
from collector.matrix.workload import ToolConversation
from collector.models import MatrixStep
from collector.remote.connect import SSHError, SSHTarget
from collector.remote.process import LineCallback, RemoteProcess
from collector.remote.ssh import SSHClient

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 120.0


@dataclass
class RunState:
    """The state of one executing run, shared by its steps and the runner's cancel watcher."""

    run_id: int
    spec: MatrixSpec
    host_id: int
    host_name: str
    target: SSHTarget
    direct_url: str | None
    boot: int
    requests_path: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    processes: set[RemoteProcess] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: bool = False

    def kill_all(self) -> None:
        """Kill every remote process group this run started and still has."""
        with self.lock:
            processes = list(self.processes)
        for proc in processes:
            if proc.running:
                try:
                    proc.kill_group()
                except SSHError as exc:
                    log.warning("matrix run %s: %s", self.run_id, exc)


class StepRecord:
    """The outcome and detail a step fills in while it runs."""

    def __init__(self) -> None:
        self.outcome = "ok"
        self.detail: dict[str, Any] = {}


class ProfileSteps:
    """Runs the steps of one run's profiles; ``run_profile`` is one profile x repetition."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        state: RunState,
        *,
        ssh: SSHClient,
        clock: Callable[[], float],
        poll_s: float,
    ) -> None:
        self.factory = factory
        self.state = state
        self.ssh = ssh
        self.clock = clock
        self.poll_s = poll_s

    @contextlib.contextmanager
    def _step(self, profile: str, repetition: int, kind: str, name: str) -> Iterator[StepRecord]:
        """Record a step: its row at start, window end, outcome and detail at the end.

        An exception inside is recorded as the step's failure and not re-raised.
        """
        state = self.state
        record = StepRecord()
        with session_scope(self.factory) as session:
            step = MatrixStep(
                run_id=state.run_id,
                profile=profile,
                repetition=repetition,
                kind=kind,
                name=name,
                started_at=self.clock(),
                detail={},
            )
            session.add(step)
            session.flush()
            step_id = step.id
        try:
            yield record
        except Exception as exc:
            log.warning("matrix run %s: %s %s failed: %s", state.run_id, kind, name, exc)
            record.outcome = "failed"
            record.detail.setdefault("error", f"{type(exc).__name__}: {exc}")
        if state.cancel.is_set() and record.outcome == "ok" and kind != "stop":
            record.outcome = "cancelled"
        with session_scope(self.factory) as session:
            row = session.get(MatrixStep, step_id)
            assert row is not None
            row.ended_at = self.clock()
            row.outcome = record.outcome
            row.detail = record.detail

    def run_profile(self, profile: str, repetition: int) -> bool:
        """One profile x repetition; False when a step failed."""
        state, spec = self.state, self.state.spec
        ok = True
        if spec.cold_start.enabled and (argv := stop_argv(spec)):
            with self._step(profile, repetition, "stop", "remove previous server") as st:
                st.detail = self._remote_run(argv, STOP_TIMEOUT_S)
        if spec.cold_start.enabled and spec.cold_start.drop_caches:
            with self._step(profile, repetition, "stop", "drop caches") as st:
                st.detail = self._remote_run(spec.cold_start.drop_caches_argv, 60.0)
                ok = ok and st.detail["exit_status"] == 0
        tags = {"matrix_run": state.run_id, "profile": profile, "repetition": repetition}
        sink = LineSink(
            self.factory, host_id=state.host_id, boot=state.boot, tags=tags, clock=self.clock
        )
        server: RemoteProcess | None = None
        try:
            with self._step(profile, repetition, "start", "start server") as st:
                argv = remote_argv(spec, profile)
                st.detail = {"argv": argv}
                server = self._start(argv, sink.callback("stdout"), sink.callback("stderr"))
                st.detail["pgid"] = server.pgid
            if server is None:
                return False
            with self._forward() as base_url:
                with self._step(profile, repetition, "health", "wait for /health") as st:
                    st.outcome, st.detail = self._wait_healthy(server, base_url)
                if st.outcome != "ok":
                    ok = False
                else:
                    for workload in spec.workloads:
                        if state.cancel.is_set():
                            break
                        with self._step(profile, repetition, "workload", workload.name) as st:
                            st.detail = self._workload(workload, base_url, tags)
                            st.outcome = st.detail.get("outcome", "failed")
                        ok = ok and st.outcome == "ok"
        finally:
            with self._step(profile, repetition, "stop", "stop server") as st:
                if server is not None and server.running:
                    server.kill_group()
                st.detail = {"exit_status": server.exit_status if server else None}
                if argv := stop_argv(spec):
                    st.detail["remove"] = self._remote_run(argv, STOP_TIMEOUT_S)
                if server is not None:
                    with state.lock:
                        state.processes.discard(server)
                    server.close()
            sink.close()
        return ok

    def _start(
        self,
        argv: list[str],
        on_stdout: LineCallback | None,
        on_stderr: LineCallback | None,
        env: dict[str, str] | None = None,
    ) -> RemoteProcess:
        state = self.state
        proc = self.ssh.start_group(
            state.target, argv, on_stdout=on_stdout, on_stderr=on_stderr, env=env
        )
        with state.lock:
            state.processes.add(proc)
        if state.cancel.is_set():  # cancelled while connecting: the watcher may have missed it
            proc.kill_group()
        return proc

    def _remote_run(self, argv: list[str], timeout: float) -> dict[str, Any]:
        result = self.ssh.run(self.state.target, argv, timeout=timeout)
        return {
            "argv": list(argv),
            "exit_status": result.exit_status,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s, 3),
            "stderr_tail": result.stderr[-2000:].decode("utf-8", "replace"),
        }

    @contextlib.contextmanager
    def _forward(self) -> Iterator[str]:
        """The server's base URL from here: the host's `vllm_url` when it is reachable
        directly, else an SSH port-forward to the health URL's address as seen on the host."""
        state = self.state
        if state.direct_url:
            yield state.direct_url.rstrip("/")
            return
        parts = urlsplit(state.spec.effective_health_url)
        port, close = self.ssh.forward_local_port(
            state.target, parts.hostname or "127.0.0.1", parts.port or 80
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            close()

    def _wait_healthy(self, server: RemoteProcess, base_url: str) -> tuple[str, dict[str, Any]]:
        spec, cancel = self.state.spec, self.state.cancel
        path = urlsplit(spec.effective_health_url).path or "/health"
        deadline = time.monotonic() + spec.startup_timeout_s
        last_error = None
        with httpx.Client(base_url=base_url, timeout=5.0) as client:
            while True:
                if cancel.is_set():
                    return "cancelled", {"error": "cancelled"}
                if not server.running:
                    return "failed", {"error": f"server exited (status {server.exit_status})"}
                try:
                    if client.get(path).status_code == 200:
                        return "ok", {"url": base_url + path}
                    last_error = "not ready"
                except httpx.HTTPError as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                if time.monotonic() >= deadline:
                    return "timeout", {
                        "error": f"no healthy /health within {spec.startup_timeout_s:g} s"
                        f" (last: {last_error})"
                    }
                cancel.wait(self.poll_s)

    def _workload(
        self,
        workload: ToolConversationSpec | CommandWorkloadSpec,
        base_url: str,
        tags: dict[str, Any],
    ) -> dict[str, Any]:
        state = self.state
        if isinstance(workload, ToolConversationSpec):
            model = workload.model or served_model(state.spec) or "default"
            result = ToolConversation(
                workload,
                base_url=workload.base_url or base_url,
                model=model,
                jsonl_path=state.requests_path,
                cancel=state.cancel,
                tags={"run_id": state.run_id, **tags},
                clock=self.clock,
            ).run()
            return result.figures()
        return self._command_workload(workload)

    def _command_workload(self, workload: CommandWorkloadSpec) -> dict[str, Any]:
        """A host command in its own group: killed on timeout or cancel, output tail kept."""
        state = self.state
        output: collections.deque[str] = collections.deque(maxlen=2000)
        started, t0 = self.clock(), time.monotonic()
        proc = self._start(workload.argv, output.append, output.append, workload.env)
        timed_out = cancelled = False
        try:
            while proc.running:
                if state.cancel.is_set():
                    cancelled = True
                    break
                if time.monotonic() - t0 >= workload.timeout_s:
                    timed_out = True
                    break
                with contextlib.suppress(TimeoutError):
                    proc.wait(self.poll_s)
            if proc.running:
                proc.kill_group()
        finally:
            with state.lock:
                state.processes.discard(proc)
            proc.close()
        return summarize_command_result(
            None if timed_out or cancelled else proc.exit_status,
            time.monotonic() - t0,
            "\n".join(output),
            name=workload.name,
            timed_out=timed_out,
            cancelled=cancelled,
            tail_bytes=workload.output_tail_bytes,
            started_at=started,
            ended_at=self.clock(),
        )
