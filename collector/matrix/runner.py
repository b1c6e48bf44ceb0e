"""Execute matrix runs on their hosts, one run per host at a time, in a thread pool.

A run is claimed from the store (a conditional UPDATE), its profiles x repetitions are run by
``ProfileSteps``, and its report is stored at the end. Cancel (the API's stored flag, watched
here, or ``cancel()``) and ``shutdown()`` kill the run's remote process groups; a failed step
never aborts the matrix unless the spec says ``abort_on_failure``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.hosts.registry import current_boot_pk
from collector.matrix import store
from collector.matrix.collect import build_report
from collector.matrix.report import render_json
from collector.matrix.spec import MatrixSpec
from collector.matrix.steps import ProfileSteps, RunState
from collector.models import Host, RunStatus
from collector.remote.ssh import SSHClient
from collector.remote.targets import require_ssh_target
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)


class MatrixRunner:
    """Executes queued runs in a thread pool; `submit`, `cancel`, `shutdown`, or `execute`."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        data_dir: Path,
        ssh: SSHClient | None = None,
        settle_s: float = 5.0,
        max_workers: int = 4,
        poll_s: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.factory = session_factory
        self.data_dir = Path(data_dir)
        self.ssh = ssh or SSHClient()
        self.settle_s = settle_s
        self.poll_s = poll_s
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="matrix")
        self._host_locks: dict[int, threading.Lock] = collections.defaultdict(threading.Lock)
        self._active: dict[int, RunState] = {}
        self._lock = threading.Lock()
        self._closing = False
        self._futures: set[Future[None]] = set()

    def _now(self) -> datetime:
        return from_epoch(self.clock())

    # -- scheduling -----------------------------------------------------------------------
    def submit(self, run_id: int) -> None:
        """Execute a queued run in the background (after the host's current run)."""
        with session_scope(self.factory) as session:
            host_id = store.get_run(session, run_id=run_id).host_id
        self._spawn(host_id)

    def resume_queued(self) -> None:
        """Start workers for every host with queued runs (collector startup)."""
        with session_scope(self.factory) as session:
            host_ids = store.hosts_with_queued_runs(session)
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
                        run_id = store.claim_next(session, host_id=host_id, now=self._now())
                    if run_id is None:
                        break
                    self._execute_claimed(run_id)
            finally:
                lock.release()
            with session_scope(self.factory) as session:
                if host_id not in store.hosts_with_queued_runs(session):
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
            state.kill_all()
        deadline = time.monotonic() + timeout
        for future in list(self._futures):
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one run --------------------------------------------------------------------------
    def execute(self, run_id: int) -> str:
        """Claim a queued run and execute it in this thread; the final status."""
        with session_scope(self.factory) as session:
            run = store.get_run(session, run_id=run_id)
            claimed = store.claim_next(session, host_id=run.host_id, now=self._now())
        if claimed != run_id:
            raise RuntimeError(f"matrix run {run_id} is not the next queued run of its host")
        return self._execute_claimed(run_id)

    def _execute_claimed(self, run_id: int) -> str:
        try:
            state = self._prepare(run_id)
        except Exception as exc:
            log.exception("matrix run %s could not start", run_id)
            with session_scope(self.factory) as session:
                store.finish_run(
                    session,
                    run_id=run_id,
                    status=RunStatus.FAILED,
                    report=None,
                    now=self._now(),
                    error=str(exc),
                )
            return RunStatus.FAILED
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
            state.kill_all()
            with self._lock:
                self._active.pop(run_id, None)
        if state.cancel.is_set():
            status = RunStatus.INTERRUPTED if self._closing else RunStatus.CANCELLED
        else:
            status = RunStatus.FAILED if state.failed else RunStatus.SUCCEEDED
        if status in (RunStatus.SUCCEEDED, RunStatus.FAILED) and self.settle_s > 0:
            # Agent batches lag the host by a second or two; let the last window's lines land.
            time.sleep(self.settle_s)
        self._finish(state, status, error)
        log.info("matrix run %s on %s: %s", run_id, state.host_name, status)
        return status

    def _prepare(self, run_id: int) -> RunState:
        with session_scope(self.factory) as session:
            run = store.get_run(session, run_id=run_id)
            spec = MatrixSpec.model_validate(run.spec)
            host = session.get(Host, run.host_id)
            assert host is not None
            path = self.data_dir / "matrix" / f"run-{run_id}" / "requests.jsonl"
            run.requests_path = str(path)
            return RunState(
                run_id=run_id,
                spec=spec,
                host_id=host.id,
                host_name=host.name,
                target=require_ssh_target(host),
                direct_url=host.vllm_url,
                boot=current_boot_pk(session, host=host),
                requests_path=path,
            )

    def _finish(self, state: RunState, status: RunStatus, error: str | None) -> None:
        with session_scope(self.factory) as session:
            run = store.get_run(session, run_id=state.run_id)
            run.status = status
            session.flush()
            report = render_json(build_report(session, run_id=state.run_id))
            store.finish_run(
                session,
                run_id=state.run_id,
                status=status,
                report=report,
                now=self._now(),
                error=error,
            )

    def _save_report(self, state: RunState) -> None:
        with session_scope(self.factory) as session:
            report = render_json(build_report(session, run_id=state.run_id))
            store.get_run(session, run_id=state.run_id).report = report

    def _watch_cancel(self, state: RunState) -> None:
        """Turn the stored cancel flag (set by any collector process) into the run's Event."""
        while not state.cancel.wait(self.poll_s):
            with self._lock:
                if state.run_id not in self._active:
                    return
            try:
                with session_scope(self.factory) as session:
                    if store.cancel_requested(session, run_id=state.run_id):
                        state.cancel.set()
            except Exception:
                log.exception("matrix run %s: cancel check failed", state.run_id)
        state.kill_all()

    def _run_matrix(self, state: RunState) -> None:
        steps = ProfileSteps(
            self.factory, state, ssh=self.ssh, clock=self.clock, poll_s=self.poll_s
        )
        spec = state.spec
        for repetition in range(1, spec.repeat + 1):
            for profile in spec.profiles:
                if state.cancel.is_set():
                    return
                ok = steps.run_profile(profile, repetition)
                self._save_report(state)
                if not ok and spec.abort_on_failure:
                    state.failed = True
                    return
