"""Freeze scenarios end to end on loopback: a real collector (scheduler on), a real sshd as the
test host's SSH, a stand-in agent process posting real batches, a signed-webhook receiver.

SIGSTOP of sshd stands in for a dead host, SIGSTOP of the agent for a stalled agent. (The
netns variant with the real agent and a cut link: test_netns_scenarios.py.)
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.collector.freeze_support import SECRET, receiver
from tests.support.sshd import TestSshd
from tests.twohost.harness import StandinAgent, running_collector, wait_for

FAST = {
    "grace_s": 1.0,
    # A live sshd under a full test run's load (~9 runnable per core) can take over a second to
    # answer an SSH probe: 1 s read it as an unreachable host (agent_down as unreachable).
    "probe_deadline_s": 3.0,
    "check_interval_s": 0.2,
    "delivery_interval_s": 0.2,
    "resolve_settle_s": 2.0,
    "stall_min_s": 2.0,
    "postmortem_interval_s": 0.3,
    "postmortem_retry_s": 0.5,
}


def incidents(c: Any) -> list[dict[str, Any]]:
    return c.api("/api/v1/incidents?host=spark")


def resolved(c: Any) -> Any:
    found = [i for i in incidents(c) if i["state"] == "resolved"]
    return found[0] if found else None


@pytest.fixture
def world(private_sshd: TestSshd, tmp_path: Path) -> Any:
    pstore = tmp_path / "pstore"
    pstore.mkdir()
    (pstore / "dmesg-ramoops-0").write_text("<0>Kernel panic - not syncing: hung_task\n")
    boot = tmp_path / "boot_id"
    boot.write_text("11111111-1111-1111-1111-111111111111\n")
    with (
        receiver() as rec,
        running_collector(
            tmp_path,
            webhook_urls=f"{rec.url}|json|{SECRET}",
            pstore_dir=str(pstore),
            postmortem_commands=[{"name": "echo", "argv": ["echo", "prev boot"]}],
            **FAST,
        ) as c,
    ):
        s = private_sshd
        token = c.add_host(
            "spark",
            ssh=f"{s.user}@{s.host}:{s.port}",
            ssh_key_path=str(s.key_path),
            ssh_host_key=s.host_key_line,
        )
        agent = StandinAgent(c.url, token, "spark", boot, 0.2).start()
        try:
            wait_for(lambda: c.api("/api/v1/hosts/spark")["status"] == "up")
            yield {"c": c, "rec": rec, "agent": agent, "sshd": s, "boot": boot}
        finally:
            agent.stop()
            s.sigcont()


def test_agent_crash_is_agent_down_then_agent_recovered(world: Any) -> None:
    c, rec, agent = world["c"], world["rec"], world["agent"]
    agent.signal(signal.SIGSTOP)
    opened = wait_for(lambda: incidents(c))[0]
    assert opened["kind"] == "agent_down"
    assert {p["name"]: p["ok"] for p in opened["probes"]}["ssh"] is True
    agent.signal(signal.SIGCONT)
    done = wait_for(lambda: resolved(c))
    assert done["resolution"] == "agent_recovered"
    wait_for(lambda: len(rec.received) >= 2)
    assert rec.events() == ["incident.opened", "incident.resolved"] and rec.bad_signatures == 0


def test_freeze_then_reboot_is_rebooted_with_postmortem(world: Any) -> None:
    c, rec, agent, sshd = world["c"], world["rec"], world["agent"], world["sshd"]
    agent.signal(signal.SIGSTOP)
    sshd.sigstop()
    opened = wait_for(lambda: incidents(c))[0]
    assert opened["kind"] == "unreachable"
    assert not any(p["ok"] for p in opened["probes"] if p["name"] == "ssh")
    # "Reboot": the old agent is gone, a new boot id, sshd back, a fresh agent.
    agent.stop()
    world["boot"].write_text("22222222-2222-2222-2222-222222222222\n")
    sshd.sigcont()
    agent.start()
    done = wait_for(lambda: resolved(c))
    assert done["resolution"] == "rebooted"
    detail = wait_for(
        lambda: (
            (d := c.api(f"/api/v1/incidents/{done['id']}"))["postmortem"]["state"] == "done" and d
        )
    )
    arts = {a["name"]: a for a in detail["artifacts"]}
    assert arts["echo"]["exit_status"] == 0
    assert arts["pstore/dmesg-ramoops-0"]["size"] > 0
    wait_for(lambda: len(rec.received) >= 2)
    assert rec.events() == ["incident.opened", "incident.resolved"]


def test_host_stall_is_stall_with_its_length(world: Any) -> None:
    c, agent, sshd = world["c"], world["agent"], world["sshd"]
    stopped = time.monotonic()
    agent.signal(signal.SIGSTOP)
    sshd.sigstop()
    wait_for(lambda: incidents(c))
    time.sleep(3.0)
    sshd.sigcont()
    agent.signal(signal.SIGCONT)
    held = time.monotonic() - stopped  # how long it was really stopped (longer under load)
    done = wait_for(lambda: resolved(c))
    assert done["resolution"] == "stall"
    # the gap in its samples: the stop, and up to an interval at each end (1 s) and a late
    # first sample after it
    assert 3.0 < done["stall_s"] < held + 3.0
