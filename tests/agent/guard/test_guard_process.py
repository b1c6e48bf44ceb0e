"""The real agent process with its guard armed: it acts while the collector is unreachable,
and its firing reaches the collector afterwards from the spool."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import TOKEN, FakeCollector, wait_for
from tests.support.docker_standin import DockerStandin
from tests.support.proctree import GIB, ProcTree

ROOT = Path(__file__).resolve().parents[3]
RULES = """\
cooldown: 10m
rules:
  - mem_available_below: 4GiB for 1s
actions:
  - docker_stop: {timeout: 5s}
"""


@pytest.fixture
def agent(
    collector: FakeCollector, proc: ProcTree, standin: DockerStandin, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    (tmp_path / "guard.yaml").write_text(RULES)
    (tmp_path / "kmsg").touch()
    cmd = [
        sys.executable, "-m", "agent", "--collector", collector.url, "--host-name", "spark-test",
        "--interval", "0.2", "--proc-root", str(proc.root), "--kmsg", str(tmp_path / "kmsg"),
        "--state-dir", str(tmp_path / "state"), "--docker-socket", standin.socket_path,
        "--no-gpu", "--canary-interval", "0", "--pstore-dir", str(tmp_path / "pstore"),
        "--guard", str(tmp_path / "guard.yaml"), "--timeout", "1",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZEWATCH_AGENT_TOKEN": TOKEN}
    with open(tmp_path / "agent.log", "ab") as log:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
    yield process
    process.kill()
    process.wait(10)


def test_the_guard_acts_while_the_collector_is_away(
    agent: subprocess.Popen[bytes],
    collector: FakeCollector,
    proc: ProcTree,
    standin: DockerStandin,
    tmp_path: Path,
) -> None:
    proc.set(available=40 * GIB)
    [started] = wait_for(lambda: collector.events("agent_started"))
    assert started["data"]["guard"]["state"] == "armed"
    assert started["data"]["guard"]["rules"] == ["mem_available_below: 4GiB for 1s"]
    collector.stop()
    proc.set(available=3 * GIB)
    wait_for(lambda: [c for c in standin.calls if c[4] is not None])
    assert [(op, name, status) for _, op, name, _, status in standin.calls] == [
        ("stop", "nemoclaw-vllm", 204)
    ]
    assert standin.calls[0][3] == {"t": "5"}
    collector.start()
    [fired] = wait_for(lambda: collector.events("guard_fired"))
    [result] = wait_for(lambda: collector.events("guard_result"))
    assert (
        fired["data"]["rule"] == "mem_available_below: 4GiB for 1s" and not fired["data"]["dry_run"]
    )
    assert fired["data"]["values"]["mem_available"] == 3 * GIB
    assert result["data"]["fire_id"] == fired["data"]["fire_id"]
    assert result["data"]["results"][0]["ok"] is True
    assert agent.poll() is None
    assert (tmp_path / "state/guard.json").exists()  # the cooldown survives a restart
