"""The guard's actions against the Docker Engine API stand-in, real processes and scripts."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.guard.actions import ActionContext, find_pids, run_actions
from agent.guard.engine import ActionRunner
from agent.guard.rules import parse_action, parse_config
from tests.support.docker_standin import DockerStandin

from .conftest import Events

LABEL = "com.nvidia.nemoclaw.managed-vllm=true"
FIRING = {"fire_id": "f1", "rule": "mem_available_below: 4GiB", "values": {"mem_available": 1}}


def context(standin: DockerStandin, **kw: Any) -> ActionContext:
    return ActionContext(docker_socket=standin.socket_path, container_label=LABEL, **kw)


def action(text: Any) -> Any:
    return parse_action(text, "actions[0]")


def calls(standin: DockerStandin) -> list[tuple[str, str, dict[str, str], int | None]]:
    return [call[1:] for call in standin.calls]


def test_graceful_stop_of_the_watched_container(standin: DockerStandin) -> None:
    [result] = run_actions((action({"docker_stop": {"timeout": "10s"}}),), context(standin), FIRING)
    assert result["ok"] is True
    # Only the running one of the two labelled containers; the exited worker is left alone.
    assert calls(standin) == [("stop", "nemoclaw-vllm", {"t": "10"}, 204)]
    assert result["detail"] == "nemoclaw-vllm: stopped (stop: HTTP 204)"


def test_a_container_ignoring_sigterm_is_killed_by_the_engine_after_t(
    standin: DockerStandin,
) -> None:
    standin.behave("nemoclaw-vllm", stop="ignore")
    [result] = run_actions((action({"docker_stop": {"timeout": "1s"}}),), context(standin), FIRING)
    assert result["ok"] and result["ms"] >= 1000  # the Engine waited t, then SIGKILLed
    assert calls(standin) == [("stop", "nemoclaw-vllm", {"t": "1"}, 204)]
    assert standin.find("nemoclaw-vllm")["inspect"]["State"]["ExitCode"] == 137  # type: ignore[index]


def test_a_daemon_stuck_on_stop_gets_the_kill(standin: DockerStandin) -> None:
    """The stand-in sees the stop, then the kill."""
    standin.behave("nemoclaw-vllm", stop="hang")
    opts = {"docker_stop": {"timeout": "1s", "kill_after": "0.5s"}}
    [result] = run_actions((action(opts),), context(standin), FIRING)
    assert [(op, status) for op, _, _, status in calls(standin)] == [("stop", None), ("kill", 204)]
    assert calls(standin)[1][2] == {"signal": "SIGKILL"}
    assert result["ok"] is True
    assert "stop: TimeoutError" in result["detail"] and "kill: HTTP 204" in result["detail"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    marker = f"fwguard{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while marker.encode() not in cmdline.read_bytes():  # a fresh exec shows it a moment later
        time.sleep(0.01)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_a_daemon_stuck_on_everything_gets_its_process_killed(
    standin: DockerStandin, sleeper: subprocess.Popen[bytes]
) -> None:
    standin.set_running("nemoclaw-vllm", pid=sleeper.pid)
    standin.behave("nemoclaw-vllm", stop="hang", kill="hang")
    opts = {"docker_stop": {"timeout": "1s", "kill_after": "0.2s"}}
    reaped: list[int] = []

    def kill(pid: int, sig: int) -> None:  # our own child: reap it so /proc forgets it
        os.kill(pid, sig)
        sleeper.wait(5)
        reaped.append(sig)

    ctx = context(standin, kill=kill, kill_wait_s=0.3)
    [result] = run_actions((action(opts),), ctx, FIRING)
    assert reaped == [signal.SIGKILL] and sleeper.returncode == -signal.SIGKILL
    assert result["ok"] and f"SIGKILL to pid {sleeper.pid}: gone" in result["detail"]


def test_nothing_running_is_a_failure_a_fallback_can_follow(standin: DockerStandin) -> None:
    standin.set_running("nemoclaw-vllm", False)
    script = (action("docker_stop"), action({"command": {"argv": ["true"], "fallback": True}}))
    stop, fallback = run_actions(script, context(standin), FIRING)
    assert (stop["ok"], stop["detail"]) == (False, "no running container to stop")
    assert fallback["ok"] and fallback["detail"] == "exit status 0"
    assert standin.calls == []


def test_a_fallback_is_skipped_after_a_success(standin: DockerStandin) -> None:
    script = (action("docker_stop"), action({"command": {"argv": ["false"], "fallback": True}}))
    _, fallback = run_actions(script, context(standin), FIRING)
    assert fallback["detail"] == "skipped: an earlier action succeeded"


def test_a_named_container(standin: DockerStandin) -> None:
    opts = {"docker_stop": {"container": "nemoclaw-vllm", "timeout": "2s"}}
    [result] = run_actions(
        (action(opts),), ActionContext(docker_socket=standin.socket_path), FIRING
    )
    assert result["ok"] and calls(standin) == [("stop", "nemoclaw-vllm", {"t": "2"}, 204)]


def test_signal_by_command_line_spares_the_agent(
    sleeper: subprocess.Popen[bytes],
) -> None:
    marker = sleeper.args[-1]  # type: ignore[index]
    ctx = ActionContext(spare_pids=frozenset({1, os.getpid()}))
    assert find_pids(ctx, marker) == [sleeper.pid]
    assert find_pids(ActionContext(spare_pids=frozenset({sleeper.pid})), marker) == []

    def kill(pid: int, sig: int) -> None:
        os.kill(pid, sig)
        sleeper.wait(5)

    opts = {"signal": {"cmdline_contains": marker, "signal": "TERM", "kill_after": "5s"}}
    [result] = run_actions((action(opts),), ActionContext(kill=kill), FIRING)
    assert sleeper.returncode == -signal.SIGTERM
    assert result["ok"] and result["detail"] == f"SIGTERM to [{sleeper.pid}]; all gone"


def test_signal_escalates_to_sigkill(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import signal, sys, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        while not ready.exists():
            time.sleep(0.02)
        (tmp_path / "vllm.pid").write_text(f"{proc.pid}\n")
        sent: list[int] = []

        def kill(pid: int, sig: int) -> None:
            sent.append(sig)
            os.kill(pid, sig)
            if sig == signal.SIGKILL:
                proc.wait(5)

        opts = {"signal": {"pid_file": str(tmp_path / "vllm.pid"), "kill_after": "0.3s"}}
        [result] = run_actions((action(opts),), ActionContext(kill=kill), FIRING)
        assert sent == [signal.SIGTERM, signal.SIGKILL] and proc.returncode == -signal.SIGKILL
        assert result["ok"] and "SIGKILL after 0.3 s" in result["detail"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def fake_systemctl(tmp_path: Path, *, stays_active: bool) -> Path:
    """A systemctl stand-in: records its argv; ``is-active`` answers from a state file."""
    script = tmp_path / "systemctl"
    active = tmp_path / "active"
    active.write_text("yes")
    keep = "" if stays_active else f"rm -f {active}; "
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path / "calls"}\n'
        f'case "$1" in kill) case "$2" in --signal=SIGKILL) rm -f {active};; *) {keep};; esac;;\n'
        f"is-active) test -e {active};; esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.parametrize("stays_active", [False, True])
def test_unit_signal_then_sigkill(tmp_path: Path, stays_active: bool) -> None:
    systemctl = fake_systemctl(tmp_path, stays_active=stays_active)
    opts = {"unit": {"name": "vllm.service", "kill_after": "0.3s", "systemctl": str(systemctl)}}
    [result] = run_actions((action(opts),), ActionContext(), FIRING)
    recorded = (tmp_path / "calls").read_text().splitlines()
    assert recorded[0] == "kill --signal=SIGTERM -- vllm.service"
    assert result["ok"] is True
    assert ("kill --signal=SIGKILL -- vllm.service" in recorded) is stays_active


def test_command_gets_the_rule_and_its_timeout_kills_its_group(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write = ["sh", "-c", f'echo "$FREEZEWATCH_GUARD_RULE $FREEZEWATCH_GUARD_VALUES" > {out}']
    slow = ["sh", "-c", "sleep 60 & sleep 60"]
    script = (
        action({"command": {"argv": write}}),
        action({"command": {"argv": slow, "timeout": "0.3s"}}),
        action({"command": {"argv": [str(tmp_path / "missing")]}}),
    )
    done, timed_out, missing = run_actions(script, ActionContext(), FIRING)
    assert done["ok"] and out.read_text() == 'mem_available_below: 4GiB {"mem_available": 1}\n'
    assert (timed_out["ok"], timed_out["detail"]) == (False, "timed out after 0.3 s (killed)")
    assert timed_out["ms"] < 30_000  # the group was killed, not waited for (60 s)
    assert not missing["ok"] and "FileNotFoundError" in missing["detail"]


def test_the_runner_reports_the_result_and_keeps_the_cooldown(
    standin: DockerStandin, tmp_path: Path
) -> None:
    events = Events()
    runner = ActionRunner(context(standin), events, tmp_path / "guard.json")
    config = parse_config({"rules": [{"mem_available_below": "1GiB"}], "actions": ["docker_stop"]})
    runner.submit({**FIRING, "tripped_at": 1234.5}, config)
    assert runner.done.wait(30)
    [result] = events.of("guard_result")
    assert result["fire_id"] == "f1" and result["results"][0]["ok"] is True
    assert (tmp_path / "guard.json").read_text() == '{"fired_at": 1234.5, "rule": "' + FIRING[
        "rule"
    ] + '"}'


def test_unit_signal_only(tmp_path: Path) -> None:
    systemctl = fake_systemctl(tmp_path, stays_active=True)
    opts = {"unit": {"name": "vllm.service", "signal": "SIGUSR1", "kill_after": 0,
                     "systemctl": str(systemctl)}}  # fmt: skip
    [result] = run_actions((action(opts),), ActionContext(), FIRING)
    assert (result["ok"], result["detail"]) == (True, "SIGUSR1 to vllm.service")
    assert (tmp_path / "calls").read_text() == "kill --signal=SIGUSR1 -- vllm.service\n"
