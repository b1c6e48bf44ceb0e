"""A run's commands on its host over the injected SSH layer.

Long-running processes (the server, command workloads) run in process groups of their own,
recorded on the run while they run (``durable.add_group``) so that a collector taking over
after kill -9 kills them. When the host froze their connections are abandoned instead of
killed; the groups are killed over a fresh connection once the host is back, and only if it
is back on the same boot (after a reboot the pgid may belong to someone else).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.matrix import durable
from collector.matrix.command import summarize_command_result
from collector.matrix.spec import CommandWorkloadSpec
from collector.matrix.state import RunState
from collector.remote.commands import kill_group_argv
from collector.remote.connect import SSHError
from collector.remote.process import LineCallback, RemoteProcess
from collector.remote.ssh import SSHClient

log = logging.getLogger(__name__)


class HostOps:
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

    # -- process groups ---------------------------------------------------------------------
    def start(
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
        with session_scope(self.factory) as session:
            durable.add_group(
                session,
                run_id=state.run_id,
                pgid=proc.pgid,
                boot_id=state.boot_id,
                step_id=state.step_id,
            )
        if state.halt.is_set() and not state.freeze.is_set():
            proc.kill_group()  # halted while connecting: the watcher may have missed it
        return proc

    def end(self, proc: RemoteProcess) -> None:
        """The group is over for this run: killed if it still runs, or abandoned with its
        frozen host (its record stays, for ``kill_left`` once the host is back)."""
        state = self.state
        with state.lock:
            state.processes.discard(proc)
            abandoned = proc.pgid in state.abandoned
        if abandoned:
            proc.abandon()
            return
        proc.close()
        with session_scope(self.factory) as session:
            durable.drop_group(session, run_id=state.run_id, pgid=proc.pgid)

    def kill_left(self, groups: list[dict[str, Any]], boot_id: str | None) -> list[dict[str, Any]]:
        """Kill recorded groups of the host's current boot over a fresh connection; groups of
        an older boot died with it. What was done to each, for the record."""
        done = []
        for group in groups:
            entry = dict(group)
            if group.get("boot_id") != boot_id:
                entry["action"] = "gone with its boot"
            else:
                try:
                    result = self.ssh.run(
                        self.state.target, kill_group_argv(int(group["pgid"])), timeout=30
                    )
                    entry["action"] = "killed" if result.exit_status == 0 else "kill failed"
                except SSHError as exc:
                    entry["action"] = f"kill failed: {exc}"
            log.info("matrix run %s: left group %s: %s", self.state.run_id, group, entry["action"])
            done.append(entry)
        return done

    # -- one-off commands -------------------------------------------------------------------
    def run(self, argv: list[str], timeout: float) -> dict[str, Any]:
        result = self.ssh.run(self.state.target, argv, timeout=timeout)
        return {
            "argv": list(argv),
            "exit_status": result.exit_status,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s, 3),
            "stderr_tail": result.stderr[-2000:].decode("utf-8", "replace"),
        }

    def ssh_answers(self) -> bool:
        try:
            return self.ssh.run(self.state.target, ["true"], timeout=10).exit_status == 0
        except SSHError:
            return False

    # -- the server -------------------------------------------------------------------------
    @contextlib.contextmanager
    def forward(self) -> Iterator[str]:
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

    def wait_healthy(self, server: RemoteProcess, base_url: str) -> tuple[str, dict[str, Any]]:
        spec, state = self.state.spec, self.state
        path = urlsplit(spec.effective_health_url).path or "/health"
        deadline = time.monotonic() + spec.startup_timeout_s
        last_error = None
        with httpx.Client(base_url=base_url, timeout=5.0) as client:
            while True:
                if (halted := state.halted()) is not None:
                    return halted, {"error": str(halted)}
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
                state.halt.wait(self.poll_s)

    # -- a command workload -----------------------------------------------------------------
    def command_workload(self, workload: CommandWorkloadSpec) -> dict[str, Any]:
        """A host command in its own group: killed on timeout or cancel, output tail kept."""
        state = self.state
        output: collections.deque[str] = collections.deque(maxlen=2000)
        started, t0 = self.clock(), time.monotonic()
        proc = self.start(workload.argv, output.append, output.append, workload.env)
        timed_out = False
        try:
            while proc.running and state.halted() is None:
                if time.monotonic() - t0 >= workload.timeout_s:
                    timed_out = True
                    break
                with contextlib.suppress(TimeoutError):
                    proc.wait(self.poll_s)
        finally:
            halted = state.halted()
            self.end(proc)
        figures = summarize_command_result(
            None if timed_out or halted else proc.exit_status,
            time.monotonic() - t0,
            "\n".join(output),
            name=workload.name,
            timed_out=timed_out,
            cancelled=halted is not None,
            tail_bytes=workload.output_tail_bytes,
            started_at=started,
            ended_at=self.clock(),
        )
        if halted is not None:
            figures["outcome"] = str(halted)
        return figures
