"""Execute matrix runs on their hosts, one run per host at a time, in a thread pool.

A run is claimed from the store under a lease (``durable``), its units run as a campaign
(``campaign``) while a watcher thread follows the cancel flag, the host's incidents and the
lease (``watch``), and its report is stored at the end. Cancel kills the run's remote process
groups; ``shutdown()`` (collector SIGTERM) kills them too, records the running step
``interrupted`` and lets go of the run still ``running``, for the next collector process to
take over; after kill -9 the lease expires and the same happens. A failed step never aborts
the campaign unless the spec says ``abort_on_failure``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.hosts.registry import current_boot_pk
from collector.matrix import durable, store
from collector.matrix.campaign import failure_reason, resume, run_campaign, run_steps
from collector.matrix.collect import build_report
from collector.matrix.remote_ops import HostOps
from collector.matrix.report import render_json
from collector.matrix.spec import MatrixSpec
from collector.matrix.state import RunState
from collector.matrix.steps import ProfileSteps
from collector.matrix.watch import RunWatcher
from collector.models import Host, RunStatus
from collector.remote.ssh import SSHClient
from collector.remote.targets import require_ssh_target
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)


def process_owner() -> str:
    """A lease owner name unique to this collector process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class MatrixRunner:
    """Executes runs in a thread pool; `submit`, `pick_up_work`, `cancel`, `shutdown`, or
    `execute` (in the caller's thread)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        data_dir: Path,
        ssh: SSHClient | None = None,
        settle_s: float = 5.0,
        max_workers: int = 4,
        poll_s: float = 0.25,
        lease_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
        leading: Callable[[], bool] | None = None,
    ) -> None:
        self.factory = session_factory
        self.data_dir = Path(data_dir)
        self.ssh = ssh or SSHClient()
        self.settle_s = settle_s
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.clock = clock
        self.owner = owner or process_owner()
        # Whether this process fires the cron schedules (the leader among replicas): runs
        # themselves go to whichever process claims them first.
        self.leading = leading or (lambda: True)
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

    def pick_up_work(self) -> None:
        """Start workers for hosts with queued runs or runs nobody drives (at startup, then
        periodically: a run whose collector died is taken over once its lease expires)."""
        with session_scope(self.factory) as session:
            host_ids = durable.hosts_with_work(session, now=self._now())
        for host_id in host_ids:
            self._spawn(host_id)

    def _spawn(self, host_id: int) -> None:
        with self._lock:
            if self._closing:
                return
            future = self._pool.submit(self._drain, host_id)
            self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def _claim(self, host_id: int) -> tuple[int, bool] | None:
        with session_scope(self.factory) as session:
            return durable.claim_next(
                session, host_id=host_id, owner=self.owner, now=self._now(), lease_s=self.lease_s
            )

    def _drain(self, host_id: int) -> None:
        """Claim and execute the host's runs one by one; one drainer per host."""
        lock = self._host_locks[host_id]
        if not lock.acquire(blocking=False):
            return  # the holder picks our run up before it lets go
        try:
            while not self._closing and (claimed := self._claim(host_id)) is not None:
                self._execute_claimed(*claimed)
        finally:
            lock.release()

    def cancel(self, run_id: int) -> None:
        """Cancel an executing run now (the API also sets the stored flag)."""
        with self._lock:
            state = self._active.get(run_id)
        if state is not None:
            state.stop(state.cancel)
            state.kill_all()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Collector shutdown: stop executing runs (their remote groups killed, the running
        step recorded ``interrupted``), let go of them for the next collector, wait."""
        with self._lock:
            self._closing = True
            states = list(self._active.values())
        for state in states:
            state.stop(state.closing)
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
            host_id = store.get_run(session, run_id=run_id).host_id
        claimed = self._claim(host_id)
        if claimed is None or claimed[0] != run_id:
            raise RuntimeError(f"matrix run {run_id} is not the next queued run of its host")
        return self._execute_claimed(*claimed)

    def _execute_claimed(self, run_id: int, taken_over: bool = False) -> str:
        try:
            state = self._prepare(run_id)
        except Exception as exc:
            log.exception("matrix run %s could not start", run_id)
            status = RunStatus.INTERRUPTED if taken_over else RunStatus.FAILED
            error = f"cannot resume after a collector restart: {exc}" if taken_over else str(exc)
            with session_scope(self.factory) as session:
                store.finish_run(
                    session, run_id=run_id, status=status, report=None, now=self._now(),
                    error=error,
                )  # fmt: skip
            return status
        with self._lock:
            self._active[run_id] = state
            if self._closing:
                state.stop(state.closing)
        watcher = RunWatcher(
            self.factory,
            state,
            owner=self.owner,
            lease_s=self.lease_s,
            poll_s=self.poll_s,
            clock=self.clock,
        ).start()
        steps = ProfileSteps(
            HostOps(self.factory, state, ssh=self.ssh, clock=self.clock, poll_s=self.poll_s)
        )
        try:
            done = resume(state, steps, self.factory, self.clock) if taken_over else set()
            run_campaign(state, steps, done=done, save=lambda: self._save_report(state))
        except Exception as exc:
            log.exception("matrix run %s failed", run_id)
            state.fail(f"{type(exc).__name__}: {exc}")
        finally:
            state.kill_all()
            watcher.stop()
            with self._lock:
                self._active.pop(run_id, None)
        return self._conclude(state, watcher)

    def _conclude(self, state: RunState, watcher: RunWatcher) -> str:
        if watcher.lost_lease:
            return RunStatus.RUNNING  # another collector drives it now
        if state.closing.is_set() and not state.cancel.is_set():
            with session_scope(self.factory) as session:
                durable.release_lease(session, run_id=state.run_id, owner=self.owner)
            log.info("matrix run %s on %s: left for the next collector", state.run_id,
                     state.host_name)  # fmt: skip
            return RunStatus.RUNNING
        with session_scope(self.factory) as session:
            reason = state.error or failure_reason(run_steps(session, run_id=state.run_id))
        if state.cancel.is_set():
            status = RunStatus.CANCELLED
        else:
            status = RunStatus.FAILED if state.failed or reason else RunStatus.SUCCEEDED
        if status != RunStatus.CANCELLED and self.settle_s > 0:
            # Agent batches lag the host by a second or two; let the last window's lines land.
            time.sleep(self.settle_s)
        self._finish(state, status, reason if status == RunStatus.FAILED else state.error)
        log.info("matrix run %s on %s: %s", state.run_id, state.host_name, status)
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
                boot_id=host.current_boot_id,
                requests_path=path,
            )

    def _finish(self, state: RunState, status: RunStatus, error: str | None) -> None:
        with session_scope(self.factory) as session:
            run = store.get_run(session, run_id=state.run_id)
            run.status, run.error = status, error
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
