"""What a firing does: the configured actions, in order, each bounded by its own timeouts.

``docker_stop`` stops the watched vLLM container(s) through the Docker Engine API: ``POST
/containers/{id}/stop?t=<timeout>`` (the Engine sends the stop signal, waits ``t`` seconds,
then SIGKILL, and answers 204, or 304 when the container had already stopped); when that call
does not come back within ``t + kill_after`` (a daemon stuck behind a host in trouble) or the
container still runs, ``POST /containers/{id}/kill`` (SIGKILL; 409 when it is not running), and
when the daemon does not answer that either, SIGKILL straight to the container's main process.
``signal`` signals processes whose command line contains a text (or a pid file's pid),
``unit`` a systemd unit, each with SIGKILL after ``kill_after`` (0: never); ``command`` runs an
argv in a process group of its own, killed at ``timeout``. Each returns a result dict
``{"action", "ok", "detail", "ms"}`` and never raises.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.guard.rules import Action
from agent.sources.docker import list_containers
from agent.unixhttp import UnixHTTPConnection, UnixJsonClient

POLL_S = 0.05


@dataclass(frozen=True)
class ActionContext:
    """The host as the actions see it (all injectable: tests hand in stand-ins)."""

    docker_socket: str = "/var/run/docker.sock"
    container_names: tuple[str, ...] = ()
    container_label: str | None = None
    proc_root: Path = Path("/proc")
    spare_pids: frozenset[int] = field(default_factory=lambda: frozenset({1, os.getpid()}))
    kill: Callable[[int, int], None] = os.kill
    kill_wait_s: float = 5.0  # for a kill call to answer, and a SIGKILLed process to go


def post(socket_path: str, path: str, timeout: float) -> int:
    """POST with no body over the Docker socket; the HTTP status (raises on timeout)."""
    conn = UnixHTTPConnection(socket_path, timeout=timeout)
    try:
        conn.request("POST", path, headers={"Content-Length": "0"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _running(client: UnixJsonClient, ref: str) -> tuple[bool, int | None]:
    state = client.get_json(f"/containers/{ref}/json").get("State") or {}
    return bool(state.get("Running")), state.get("Pid") or None


def _stop_one(
    ctx: ActionContext, cid: str, name: str, pid: int | None, opts: dict[str, Any]
) -> tuple[bool, str]:
    grace, extra = float(opts["timeout"]), float(opts["kill_after"])
    steps = []
    stopped = False
    try:
        stop_path = f"/containers/{cid}/stop?t={math.ceil(grace)}"
        status = post(ctx.docker_socket, stop_path, grace + extra)
        steps.append(f"stop: HTTP {status}")
        if status in (204, 304):
            client = UnixJsonClient(ctx.docker_socket, ctx.kill_wait_s)
            try:
                stopped = not _running(client, cid)[0]
            finally:
                client.close()
    except Exception as exc:
        steps.append(f"stop: {_why(exc)}")
    if not stopped:
        try:
            status = post(
                ctx.docker_socket, f"/containers/{cid}/kill?signal=SIGKILL", ctx.kill_wait_s
            )
            steps.append(f"kill: HTTP {status}")
            stopped = status in (204, 409)
        except Exception as exc:
            steps.append(f"kill: {_why(exc)}")
    if not stopped and pid:
        gone = _signal_and_wait(ctx, [pid], signal.SIGKILL, ctx.kill_wait_s)
        steps.append(f"SIGKILL to pid {pid}: {'gone' if gone == [pid] else 'still there'}")
        stopped = gone == [pid]
    return stopped, f"{name}: {'stopped' if stopped else 'NOT stopped'} ({', '.join(steps)})"


def docker_stop(action: Action, ctx: ActionContext, firing: dict[str, Any]) -> tuple[bool, str]:
    opts = action.options
    client = UnixJsonClient(ctx.docker_socket, ctx.kill_wait_s)
    try:
        if opts["container"]:
            refs = [(opts["container"], opts["container"])]
        else:
            items = list_containers(client, ctx.container_names, ctx.container_label)
            refs = [(i["Id"], i["Name"]) for i in items if i.get("State") == "running"]
        targets = []
        for ref, name in refs:
            running, pid = _running(client, ref)
            if running:
                targets.append((ref, name, pid))
    except Exception as exc:
        return False, f"cannot list the watched containers: {_why(exc)}"
    finally:
        client.close()
    if not targets:
        return False, "no running container to stop"
    outcomes: list[tuple[bool, str]] = [(False, "")] * len(targets)

    def stop(i: int) -> None:
        outcomes[i] = _stop_one(ctx, *targets[i], opts)

    threads = [threading.Thread(target=stop, args=(i,), daemon=True) for i in range(len(targets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return all(ok for ok, _ in outcomes), "; ".join(detail for _, detail in outcomes)


def find_pids(ctx: ActionContext, cmdline_contains: str) -> list[int]:
    """Processes whose NUL-separated command line, joined by spaces, contains the text."""
    pids = []
    for entry in ctx.proc_root.iterdir():
        if not entry.name.isdigit() or int(entry.name) in ctx.spare_pids:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline_contains in cmdline:
            pids.append(int(entry.name))
    return sorted(pids)


def _alive(ctx: ActionContext, pid: int) -> bool:
    try:
        stat = (ctx.proc_root / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 : stat.rindex(")") + 3] != "Z"  # a zombie has exited


def _signal_and_wait(ctx: ActionContext, pids: list[int], sig: int, wait_s: float) -> list[int]:
    """Signal ``pids``; the ones gone within ``wait_s``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            ctx.kill(pid, sig)
    deadline = time.monotonic() + wait_s
    while any(_alive(ctx, p) for p in pids) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return [p for p in pids if not _alive(ctx, p)]


def signal_processes(
    action: Action, ctx: ActionContext, firing: dict[str, Any]
) -> tuple[bool, str]:
    opts = action.options
    if opts["pid_file"]:
        try:
            pids = [int(Path(opts["pid_file"]).read_text().split()[0])]
        except (OSError, ValueError, IndexError) as exc:
            return False, f"pid file {opts['pid_file']}: {_why(exc)}"
        pids = [p for p in pids if p not in ctx.spare_pids]
    else:
        pids = find_pids(ctx, opts["cmdline_contains"])
    if not pids:
        return False, "no process matches"
    sig = signal.Signals[opts["signal"]]
    detail = f"{sig.name} to {pids}"
    try:
        if not opts["kill_after"]:  # only signal: nothing to wait for
            for pid in pids:
                ctx.kill(pid, sig)
            return True, detail
        gone = _signal_and_wait(ctx, pids, sig, opts["kill_after"])
        left = [p for p in pids if p not in gone]
        if left:
            gone += _signal_and_wait(ctx, left, signal.SIGKILL, ctx.kill_wait_s)
            left = [p for p in pids if p not in gone]
            detail += f", SIGKILL after {opts['kill_after']:g} s"
    except (PermissionError, ProcessLookupError) as exc:
        return False, f"{detail}: {_why(exc)}"
    return not left, detail + (f"; still running: {left}" if left else "; all gone")


def _systemctl(opts: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([opts["systemctl"], *args], capture_output=True, text=True, timeout=10)


def signal_unit(action: Action, ctx: ActionContext, firing: dict[str, Any]) -> tuple[bool, str]:
    opts, unit = action.options, action.options["name"]
    try:
        sent = _systemctl(opts, "kill", f"--signal={opts['signal']}", "--", unit)
        if sent.returncode != 0:
            return False, f"systemctl kill: {(sent.stderr or sent.stdout).strip()[-300:]}"
        if not opts["kill_after"]:  # only signal: nothing to wait for
            return True, f"{opts['signal']} to {unit}"
        deadline = time.monotonic() + opts["kill_after"]
        while True:
            active = _systemctl(opts, "is-active", "--quiet", "--", unit).returncode == 0
            if not active or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S * 4)
        detail = f"{opts['signal']} to {unit}"
        if active:
            _systemctl(opts, "kill", "--signal=SIGKILL", "--", unit)
            active = _systemctl(opts, "is-active", "--quiet", "--", unit).returncode == 0
            detail += f", SIGKILL after {opts['kill_after']:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"systemctl: {_why(exc)}"
    return not active, detail + ("; still active" if active else "; inactive")


def run_command(action: Action, ctx: ActionContext, firing: dict[str, Any]) -> tuple[bool, str]:
    opts = action.options
    env = {
        **os.environ,
        "FREEZEWATCH_GUARD_RULE": str(firing.get("rule", "")),
        "FREEZEWATCH_GUARD_VALUES": json.dumps(firing.get("values", {})),
    }
    try:
        proc = subprocess.Popen(
            opts["argv"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        return False, f"{opts['argv'][0]}: {_why(exc)}"
    try:
        out, _ = proc.communicate(timeout=opts["timeout"])
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return False, f"timed out after {opts['timeout']:g} s (killed)"
    tail = out.decode(errors="replace").strip()[-300:]
    return proc.returncode == 0, f"exit status {proc.returncode}" + (f": {tail}" if tail else "")


RUNNERS = {
    "docker_stop": docker_stop,
    "signal": signal_processes,
    "unit": signal_unit,
    "command": run_command,
}


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def run_actions(
    actions: tuple[Action, ...], ctx: ActionContext, firing: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every action in order; a ``fallback`` one only when all before it failed."""
    results: list[dict[str, Any]] = []
    for action in actions:
        started = time.monotonic()
        if action.fallback and any(r["ok"] for r in results):
            ok, detail = True, "skipped: an earlier action succeeded"
        else:
            try:
                ok, detail = RUNNERS[action.kind](action, ctx, firing)
            except Exception as exc:  # a bug must not take the guard down
                ok, detail = False, f"failed: {_why(exc)}"
        ms = round((time.monotonic() - started) * 1000, 1)
        results.append({"action": action.describe(), "ok": ok, "detail": detail, "ms": ms})
    return results
