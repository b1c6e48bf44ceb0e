"""Execute matrix runs on their hosts over SSH, one run per host at a time.

Per profile x repetition: stop/remove the previous server, start this one in its own process
group (its output streamed into the store as `source="vllm"` lines tagged with run/profile),
wait for `/health` through an SSH port-forward, run each workload, stop the server. Every step
is recorded with its window and outcome; a failed step never aborts the matrix unless the spec
says `abort_on_failure`. Cancel (API flag or `cancel()`) and `shutdown()` kill the remote group.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from agent.wire import MAX_LINE_BYTES
from collector.db import session_scope
from collector.hosts.registry import boot_pk
from collector.ingest.derive import record_vllm_lines
from collector.matrix import store as matrix_runs
from collector.matrix.argv import remote_argv, served_model, stop_argv
from collector.matrix.collect import build_report
from collector.matrix.report import render_json
from collector.matrix.spec import (
    CommandWorkloadSpec,
    MatrixSpec,
    ToolConversationSpec,
)
from collector.matrix.workload import ToolConversation, summarize_command_result
from collector.models import CHANNEL_AGENT, Host, Line, MatrixRun, MatrixStep
from collector.remote import ssh
from collector.vllm.log_parser import VllmLogParser
from collector.vllm.store import VllmStream

log = logging.getLogger(__name__)

NO_AGENT_BOOT = "unknown"
STOP_TIMEOUT_S = 120.0


def host_target(host: Host) -> ssh.SSHTarget:
    """The pinned SSH target stored for a host."""
    if not host.ssh_host or not host.ssh_user:
        raise ValueError(f"host {host.name!r} has no SSH settings (ssh_user, ssh_host)")
    return ssh.SSHTarget(
        user=host.ssh_user,
        host=host.ssh_host,
        port=host.ssh_port or 22,
        key_path=host.ssh_key_path,
        known_host_key=host.ssh_host_key,
    )


class _LineSink:
    """Buffers the server's output lines and writes them to the store every `flush_s`.

    Stored lines then go through the vLLM part of the telemetry hook with this server's own
    parser (one sink per server start), so the run's starts, phases and startup plans are
    vLLM starts of the host like those of the agent's log stream.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        host_id: int,
        boot: int,
        tags: dict[str, Any],
        clock: Callable[[], float],
        flush_s: float = 0.5,
    ) -> None:
        self._factory = factory
        self._host_id = host_id
        self._boot = boot
        self._tags = tags
        self._clock = clock
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # the loop and close() never feed the parser twice
        self._stream = VllmStream(VllmLogParser())
        self._stop = threading.Event()
        self._flush_s = flush_s
        self._thread = threading.Thread(target=self._loop, name="matrix-lines", daemon=True)
        self._thread.start()

    def callback(self, stream: str) -> Callable[[str], None]:

        fields = {**self._tags, "stream": stream}

        def add(text: str) -> None:
            now = self._clock()
            raw = text.encode("utf-8", "replace")
            truncated = len(raw) > MAX_LINE_BYTES
            if truncated:
                text = raw[:MAX_LINE_BYTES].decode("utf-8", "ignore")
            row = {
                "host_id": self._host_id,
                "boot_pk": self._boot,
                "received_at": now,
                "ts": now,
                "source": "vllm",
                "text": text,
                "truncated": truncated,
                "fields": fields,
                "channels": CHANNEL_AGENT,
                "agent_received_at": now,
            }
            with self._lock:
                self._rows.append(row)

        return add

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                rows, self._rows = self._rows, []
            if not rows:
                return
            with session_scope(self._factory) as session:
                ids = session.scalars(
                    insert(Line).returning(Line.id, sort_by_parameter_order=True), rows
                ).all()
                stored = [(pk, row["ts"], row["text"]) for pk, row in zip(ids, rows, strict=True)]
                try:
                    with session.begin_nested():  # a parser failure never costs the lines
                        record_vllm_lines(
                            session,
                            host_id=self._host_id,
                            boot_pk=self._boot,
                            stream=self._stream,
                            lines=stored,
                        )
                except Exception:
                    log.exception("vLLM telemetry of matrix server lines failed")
                    self._stream = VllmStream(VllmLogParser())  # ahead of the rollback

    def _loop(self) -> None:
        while not self._stop.wait(self._flush_s):
            try:
                self.flush()
            except Exception:
                log.exception("storing matrix server lines failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.flush()


@dataclass
class _Run:
    """The state of one executing run."""

    run_id: int
    spec: MatrixSpec
    host_id: int
    host_name: str
    target: ssh.SSHTarget
    direct_url: str | None
    boot: int
    requests_path: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    processes: set[ssh.RemoteProcess] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: bool = False


class StepRecord:
    """The outcome and detail a step fills in while it runs."""

    def __init__(self) -> None:
        self.outcome = "ok"
        self.detail: dict[str, Any] = {}


class MatrixRunner:
    """Executes queued runs in a thread pool; `submit`, `cancel`, `shutdown`, or `execute`."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        data_dir: Path,
        target_for: Callable[[Host], ssh.SSHTarget] = host_target,
        remote_env: dict[str, str] | None = None,
        settle_s: float = 5.0,
        max_workers: int = 4,
        poll_s: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.factory = session_factory
        self.data_dir = Path(data_dir)
        self.target_for = target_for
        # Environment for every remote command (e.g. a PATH where `docker` lives).
        self.remote_env = dict(remote_env or {})
        self.settle_s = settle_s
        self.poll_s = poll_s
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="matrix")
        self._host_locks: dict[int, threading.Lock] = collections.defaultdict(threading.Lock)
        self._active: dict[int, _Run] = {}
        self._lock = threading.Lock()
        self._closing = False
        self._futures: set[Future[None]] = set()

    # -- scheduling -----------------------------------------------------------------------
    def submit(self, run_id: int) -> None:
        """Execute a queued run in the background (after the host's current run)."""
        with session_scope(self.factory) as session:
            host_id = matrix_runs.get_run(session, run_id=run_id).host_id
        self._spawn(host_id)

    def resume_queued(self) -> None:
        """Start workers for every host with queued runs (collector startup)."""
        with session_scope(self.factory) as session:
            host_ids = matrix_runs.hosts_with_queued_runs(session)
        for host_id in host_ids:
            self._spawn(host_id)

    def _spawn(self, host_id: int) -> None:
        with self._lock:
            if self._closing:
                return
            future = self._pool.submit(self._drain, host_id)
            self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def _drain(self, host_id: int) -> None:
        """Claim and execute the host's queued runs one by one; one drainer per host."""
        lock = self._host_locks[host_id]
        while not self._closing:
            if not lock.acquire(blocking=False):
                return  # the holder picks our run up before it lets go
            try:
                while not self._closing:
                    with session_scope(self.factory) as session:
                        run_id = matrix_runs.claim_next(session, host_id=host_id)
                    if run_id is None:
                        break
                    self._execute_claimed(run_id)
            finally:
                lock.release()
            with session_scope(self.factory) as session:
                if host_id not in matrix_runs.hosts_with_queued_runs(session):
                    return

    def cancel(self, run_id: int) -> None:
        """Cancel an executing run now (the API also sets the stored flag)."""
        with self._lock:
            state = self._active.get(run_id)
        if state is not None:
            state.cancel.set()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Collector shutdown: stop executing runs, kill their remote groups, wait for them."""
        with self._lock:
            self._closing = True
            states = list(self._active.values())
        for state in states:
            state.cancel.set()
            self._kill_all(state)
        deadline = time.monotonic() + timeout
        for future in list(self._futures):
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one run --------------------------------------------------------------------------
    def execute(self, run_id: int) -> str:
        """Claim a queued run and execute it in this thread; the final status."""
        with session_scope(self.factory) as session:
            run = matrix_runs.get_run(session, run_id=run_id)
            claimed = matrix_runs.claim_next(session, host_id=run.host_id)
        if claimed != run_id:
            raise RuntimeError(f"matrix run {run_id} is not the next queued run of its host")
        return self._execute_claimed(run_id)

    def _execute_claimed(self, run_id: int) -> str:
        try:
            state = self._prepare(run_id)
        except Exception as exc:
            log.exception("matrix run %s could not start", run_id)
            with session_scope(self.factory) as session:
                matrix_runs.finish_run(
                    session, run_id=run_id, status="failed", report=None, error=str(exc)
                )
            return "failed"
        with self._lock:
            self._active[run_id] = state
        watcher = threading.Thread(target=self._watch_cancel, args=(state,), daemon=True)
        watcher.start()
        error = None
        try:
            self._run_matrix(state)
        except Exception as exc:
            log.exception("matrix run %s failed", run_id)
            state.failed, error = True, f"{type(exc).__name__}: {exc}"
        finally:
            self._kill_all(state)
            with self._lock:
                self._active.pop(run_id, None)
        if state.cancel.is_set():
            status = "interrupted" if self._closing else "cancelled"
        else:
            status = "failed" if state.failed else "succeeded"
        if status in ("succeeded", "failed") and self.settle_s > 0:
            # Agent batches lag the host by a second or two; let the last window's lines land.
            time.sleep(self.settle_s)
        self._finish(state, status, error)
        log.info("matrix run %s on %s: %s", run_id, state.host_name, status)
        return status

    def _prepare(self, run_id: int) -> _Run:
        with session_scope(self.factory) as session:
            run = matrix_runs.get_run(session, run_id=run_id)
            spec = MatrixSpec.model_validate(run.spec)
            host = session.get(Host, run.host_id)
            assert host is not None
            boot = boot_pk(session, host=host, boot_id=host.current_boot_id or NO_AGENT_BOOT)
            path = self.data_dir / "matrix" / f"run-{run_id}" / "requests.jsonl"
            run.requests_path = str(path)
            return _Run(
                run_id=run_id,
                spec=spec,
                host_id=host.id,
                host_name=host.name,
                target=self.target_for(host),
                direct_url=host.vllm_url,
                boot=boot,
                requests_path=path,
            )

    def _finish(self, state: _Run, status: str, error: str | None) -> None:
        with session_scope(self.factory) as session:
            run = matrix_runs.get_run(session, run_id=state.run_id)
            run.status = status
            session.flush()
            report = render_json(build_report(session, run_id=state.run_id))
            matrix_runs.finish_run(
                session, run_id=state.run_id, status=status, report=report, error=error
            )

    def _save_report(self, state: _Run) -> None:
        with session_scope(self.factory) as session:
            report = render_json(build_report(session, run_id=state.run_id))
            matrix_runs.get_run(session, run_id=state.run_id).report = report

    def _watch_cancel(self, state: _Run) -> None:
        """Turn the stored cancel flag (set by any collector process) into the run's Event."""
        while not state.cancel.wait(self.poll_s):
            with self._lock:
                if state.run_id not in self._active:
                    return
            try:
                with session_scope(self.factory) as session:
                    if matrix_runs.cancel_requested(session, run_id=state.run_id):
                        state.cancel.set()
            except Exception:
                log.exception("matrix run %s: cancel check failed", state.run_id)
        self._kill_all(state)

    def _kill_all(self, state: _Run) -> None:
        with state.lock:
            processes = list(state.processes)
        for proc in processes:
            if proc.running:
                try:
                    proc.kill_group()
                except ssh.SSHError as exc:
                    log.warning("matrix run %s: %s", state.run_id, exc)

    def _run_matrix(self, state: _Run) -> None:
        spec = state.spec
        for repetition in range(1, spec.repeat + 1):
            for profile in spec.profiles:
                if state.cancel.is_set():
                    return
                ok = self._run_profile(state, profile, repetition)
                self._save_report(state)
                if not ok and spec.abort_on_failure:
                    state.failed = True
                    return

    @contextlib.contextmanager
    def _step(
        self, state: _Run, profile: str, repetition: int, kind: str, name: str
    ) -> Iterator[StepRecord]:
        """Record a step: its row at start, window end, outcome and detail at the end.

        An exception inside is recorded as the step's failure and not re-raised.
        """
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
            step = session.get(MatrixStep, step_id)
            assert step is not None
            step.ended_at = self.clock()
            step.outcome = record.outcome
            step.detail = record.detail

    def _run_profile(self, state: _Run, profile: str, repetition: int) -> bool:
        """One profile x repetition; False when a step failed."""
        spec = state.spec
        ok = True
        if spec.cold_start.enabled and (argv := stop_argv(spec)):
            with self._step(state, profile, repetition, "stop", "remove previous server") as st:
                st.detail = self._remote_run(state, argv, STOP_TIMEOUT_S)
        if spec.cold_start.enabled and spec.cold_start.drop_caches:
            with self._step(state, profile, repetition, "stop", "drop caches") as st:
                st.detail = self._remote_run(state, spec.cold_start.drop_caches_argv, 60.0)
                ok = ok and st.detail["exit_status"] == 0
        tags = {"matrix_run": state.run_id, "profile": profile, "repetition": repetition}
        sink = _LineSink(
            self.factory, host_id=state.host_id, boot=state.boot, tags=tags, clock=self.clock
        )
        server: ssh.RemoteProcess | None = None
        try:
            with self._step(state, profile, repetition, "start", "start server") as st:
                argv = remote_argv(spec, profile)
                st.detail = {"argv": argv}
                server = self._start(state, argv, sink.callback("stdout"), sink.callback("stderr"))
                st.detail["pgid"] = server.pgid
            if server is None:
                return False
            with self._forward(state) as base_url:
                with self._step(state, profile, repetition, "health", "wait for /health") as st:
                    st.outcome, st.detail = self._wait_healthy(state, server, base_url)
                if st.outcome != "ok":
                    ok = False
                else:
                    for workload in spec.workloads:
                        if state.cancel.is_set():
                            break
                        with self._step(
                            state, profile, repetition, "workload", workload.name
                        ) as st:
                            st.detail = self._workload(state, workload, base_url, tags)
                            st.outcome = st.detail.get("outcome", "failed")
                        ok = ok and st.outcome == "ok"
        finally:
            with self._step(state, profile, repetition, "stop", "stop server") as st:
                if server is not None and server.running:
                    server.kill_group()
                st.detail = {"exit_status": server.exit_status if server else None}
                if argv := stop_argv(spec):
                    st.detail["remove"] = self._remote_run(state, argv, STOP_TIMEOUT_S)
                if server is not None:
                    with state.lock:
                        state.processes.discard(server)
                    server.close()
            sink.close()
        return ok

    def _start(
        self,
        state: _Run,
        argv: list[str],
        on_stdout: Callable[[str], None] | None,
        on_stderr: Callable[[str], None] | None,
        env: dict[str, str] | None = None,
    ) -> ssh.RemoteProcess:
        proc = ssh.start_group(
            state.target,
            argv,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            env={**self.remote_env, **(env or {})} or None,
        )
        with state.lock:
            state.processes.add(proc)
        if state.cancel.is_set():  # cancelled while connecting: the watcher may have missed it
            proc.kill_group()
        return proc

    def _remote_run(self, state: _Run, argv: list[str], timeout: float) -> dict[str, Any]:
        result = ssh.run(state.target, argv, timeout=timeout, env=self.remote_env or None)
        return {
            "argv": list(argv),
            "exit_status": result.exit_status,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s, 3),
            "stderr_tail": result.stderr[-2000:].decode("utf-8", "replace"),
        }

    @contextlib.contextmanager
    def _forward(self, state: _Run) -> Iterator[str]:
        """The server's base URL from here: the host's `vllm_url` when it is reachable
        directly, else an SSH port-forward to the health URL's address as seen on the host."""
        if state.direct_url:
            yield state.direct_url.rstrip("/")
            return
        parts = urlsplit(state.spec.effective_health_url)
        port, close = ssh.forward_local_port(
            state.target, parts.hostname or "127.0.0.1", parts.port or 80
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            close()

    def _wait_healthy(
        self, state: _Run, server: ssh.RemoteProcess, base_url: str
    ) -> tuple[str, dict[str, Any]]:
        path = urlsplit(state.spec.effective_health_url).path or "/health"
        deadline = time.monotonic() + state.spec.startup_timeout_s
        last_error = None
        with httpx.Client(base_url=base_url, timeout=5.0) as client:
            while True:
                if state.cancel.is_set():
                    return "cancelled", {"error": "cancelled"}
                if not server.running:
                    status = server.exit_status
                    return "failed", {"error": f"server exited (status {status})"}
                try:
                    if client.get(path).status_code == 200:
                        return "ok", {"url": base_url + path}
                    last_error = "not ready"
                except httpx.HTTPError as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                if time.monotonic() >= deadline:
                    return "timeout", {
                        "error": f"no healthy /health within {state.spec.startup_timeout_s:g} s"
                        f" (last: {last_error})"
                    }
                state.cancel.wait(self.poll_s)

    def _workload(
        self,
        state: _Run,
        workload: ToolConversationSpec | CommandWorkloadSpec,
        base_url: str,
        tags: dict[str, Any],
    ) -> dict[str, Any]:
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
        return self._command_workload(state, workload)

    def _command_workload(self, state: _Run, workload: CommandWorkloadSpec) -> dict[str, Any]:
        """A host command in its own group: killed on timeout or cancel, output tail kept."""
        output: collections.deque[str] = collections.deque(maxlen=2000)
        started, t0 = self.clock(), time.monotonic()
        proc = self._start(state, workload.argv, output.append, output.append, workload.env)
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


def run_report(session: Session, *, run: MatrixRun) -> dict[str, Any]:
    """The stored report, or one built now for a run still going."""
    if run.report is not None and run.status not in matrix_runs.ACTIVE:
        return run.report
    return render_json(build_report(session, run_id=run.id))
