"""Freeze scenarios with a second host in a network namespace: the real agent and a real sshd
inside it, a real collector process (scheduler on, SQLite) outside on the veth address, and a
webhook receiver that verifies every Standard Webhooks signature.

The "host" is frozen by SIGSTOP of every process in the namespace, cut off by taking its veth
down, rebooted by killing everything and starting again with a new boot id (the agent reads it
from a fake proc tree the test controls).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.readback.timebase import SKEW_MIN_S
from tests.collector.freeze_support import SECRET, Receiver, receiver
from tests.support import sshd as sshd_support
from tests.support.netns import NetNamespace
from tests.support.skips import require
from tests.support.sshd import TestSshd
from tests.twohost import harness

pytestmark = [pytest.mark.netns, pytest.mark.sshd, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
ADMIN = "fwa_netns-admin-Ef28rLhNQZGSbh-5QwGNgv21Q4cLSWSC"
HOST = "spark-ns"
INTERVAL_S = 0.5
STALL_S = 6.0
COLLECTOR_ENV = harness.FAST_ENV
PANIC = "<0>Kernel panic - not syncing: softlockup: hung tasks\n"


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


def new_boot_id() -> str:
    return str(uuid.uuid4())


@dataclass
class World:
    ns: NetNamespace
    sshd: TestSshd
    rec: Receiver
    url: str
    token: str
    tmp: Path
    agent: subprocess.Popen[bytes] | None = None

    @property
    def proc_root(self) -> Path:
        return self.tmp / "proc"

    @property
    def pstore(self) -> Path:
        return self.tmp / "pstore"

    def api(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=5)
        r.raise_for_status()
        return r.json()

    def incidents(self) -> list[dict[str, Any]]:
        return self.api(f"/api/v1/incidents?host={HOST}")  # type: ignore[no-any-return]

    def opened(self) -> dict[str, Any]:
        """The one incident of the scenario, once it is open."""
        found = wait_for(self.incidents, "incident opened")
        assert len(found) == 1, found
        return found[0]  # type: ignore[no-any-return]

    def resolved(self, timeout: float = 20.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            found = [i for i in self.incidents() if i["state"] == "resolved"]
            return found[0] if found else None

        return wait_for(done, "incident resolved", timeout)  # type: ignore[no-any-return]

    def write_boot_id(self, boot_id: str) -> None:
        (self.proc_root / "sys/kernel/random/boot_id").write_text(boot_id + "\n")

    def start_agent(self) -> None:
        argv = [
            sys.executable, "-m", "agent", "--collector", self.url, "--token", self.token,
            "--host-name", HOST, "--interval", str(INTERVAL_S), "--timeout", "1",
            "--proc-root", str(self.proc_root), "--kmsg", str(self.tmp / "kmsg"),
            "--state-dir", str(self.tmp / "state"), "--pstore-dir", str(self.pstore),
            "--no-gpu", "--container-label", "", "--canary-interval", "0",
            "--docker-socket", str(self.tmp / "no-docker.sock"), "--journalctl", "false",
        ]  # fmt: skip
        log = open(self.tmp / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.agent = self.ns.run_in_ns(
            argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=log
        )

    def wait_up(self) -> None:
        wait_for(lambda: self.api(f"/api/v1/hosts/{HOST}")["status"] == "up", "host up", 30)

    def signal_all(self, sig: int) -> list[int]:
        pids = self.ns.signal(sig)
        assert self.agent is not None and self.agent.pid in pids and self.sshd.pid in pids
        return pids

    def incident_webhooks(self, count: int) -> list[dict[str, Any]]:
        """The verified `incident.*` webhook bodies once `count` arrived (kernel.event aside)."""

        def bodies() -> list[dict[str, Any]]:
            received = [r["body"] for r in self.rec.received]
            return [b for b in received if b["event"].startswith("incident.")]

        found = wait_for(lambda: len(bodies()) >= count and bodies(), f"{count} webhooks", 15)
        assert self.rec.bad_signatures == 0
        return found  # type: ignore[no-any-return]


def start_collector(
    db_url: str, bind: str, webhook: str, pstore: Path, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m collector serve` bound to the veth address only; (process, base URL)."""
    env = {
        **COLLECTOR_ENV,
        "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
        "FREEZEWATCH_WEBHOOK_URLS": f"{webhook}|json|{SECRET}",
        "FREEZEWATCH_PSTORE_DIR": str(pstore),
    }
    return harness.start_collector(db_url, bind, env, log)


def add_host(db_url: str, sshd: TestSshd) -> str:
    """Register the host through the CLI, trusting the key the namespace's sshd presents."""
    argv = [
        sys.executable, "-m", "collector", "--db", db_url, "add-host", HOST,
        "--ssh", f"root@{sshd.host}:{sshd.port}", "--key", str(sshd.key_path), "--trust-host-key",
    ]  # fmt: skip
    result = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture
def world(netns: NetNamespace, tmp_path: Path) -> Iterator[World]:
    ok, reason = sshd_support.available()
    require(ok, reason)
    shutil.copytree(FIXTURES / "proc", tmp_path / "proc")
    (tmp_path / "pstore").mkdir()
    (tmp_path / "kmsg").write_bytes(b"6,1,1000,-;netns test host booted\n")
    db_url = f"sqlite:///{tmp_path / 'collector.db'}"
    with (
        TestSshd(host=netns.peer_addr, argv_prefix=netns.ns_argv([])) as sshd,
        receiver() as rec,
    ):
        token = add_host(db_url, sshd)
        collector, url = start_collector(
            db_url, netns.host_addr, rec.url, tmp_path / "pstore", tmp_path / "collector.log"
        )
        w = World(ns=netns, sshd=sshd, rec=rec, url=url, token=token, tmp=tmp_path)
        try:
            assert w.api(f"/api/v1/hosts/{HOST}")["config"]["ssh_host_key"] == sshd.host_key_line
            w.write_boot_id(new_boot_id())
            w.start_agent()
            w.wait_up()
            yield w
        finally:
            netns.signal(signal.SIGKILL)  # SIGKILL works on stopped processes too
            netns.link_up()
            collector.terminate()
            try:
                collector.wait(20)
            except subprocess.TimeoutExpired:
                collector.kill()
                collector.wait(5)


def probe_ok(incident: dict[str, Any]) -> dict[str, bool]:
    return {p["name"]: p["ok"] for p in incident["probes"]}


def assert_webhooks(w: World, incident: dict[str, Any]) -> None:
    bodies = w.incident_webhooks(2)
    assert [b["event"] for b in bodies] == ["incident.opened", "incident.resolved"]
    assert all(b["host"]["name"] == HOST for b in bodies)
    assert bodies[0]["incident"]["kind"] == incident["kind"]
    assert bodies[1]["incident"]["resolution"] == incident["resolution"]
    assert bodies[1]["incident"]["id"] == incident["id"]


def test_freeze_then_reboot_is_unreachable_then_rebooted_with_postmortem(world: World) -> None:
    w = world
    w.signal_all(signal.SIGSTOP)
    w.ns.link_down()
    opened = w.opened()
    assert opened["kind"] == "unreachable"
    assert probe_ok(opened)["ssh"] is False and probe_ok(opened)["tcp"] is False
    old_boot = opened["boot_id"]

    # The frozen kernel panics and leaves a pstore record; then the machine is reset.
    (w.pstore / "dmesg-ramoops-0").write_text(PANIC)
    w.signal_all(signal.SIGKILL)
    for child in (w.agent, w.sshd.process):
        assert child is not None
        child.wait(10)  # reaped: no zombie keeps its place
    wait_for(lambda: not w.ns.pids(), "old processes gone", 10)
    boot = new_boot_id()
    w.write_boot_id(boot)
    w.ns.link_up()
    w.sshd.restart()
    w.start_agent()

    done = w.resolved()
    assert done["resolution"] == "rebooted"
    assert done["boot_id"] == old_boot and done["return_boot_id"] == boot

    def postmortem() -> dict[str, Any] | None:
        detail = w.api(f"/api/v1/incidents/{done['id']}")
        return detail if detail["postmortem"]["state"] == "done" else None

    detail = wait_for(postmortem, "post-mortem done", 30)
    arts = {a["name"]: a for a in detail["artifacts"]}
    assert set(arts) >= {
        "journal-kernel-prev-boot",
        "journal-warnings-prev-boot",
        "pstore-list",
        "pstore/dmesg-ramoops-0",
    }
    # Every command ran over SSH and has its exit status; journalctl -b -1 may fail here.
    assert all(isinstance(a["exit_status"], int) for a in arts.values())
    assert arts["pstore-list"]["exit_status"] == 0
    assert arts["pstore/dmesg-ramoops-0"]["exit_status"] == 0
    panic = httpx.get(
        f"{w.url}/api/v1/incidents/{done['id']}/artifacts/pstore/dmesg-ramoops-0",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=5,
    )
    assert panic.status_code == 200 and PANIC.strip() in panic.text
    assert_webhooks(w, done)


def test_agent_crash_is_agent_down_then_agent_recovered(world: World) -> None:
    w = world
    assert w.agent is not None
    os.kill(w.agent.pid, signal.SIGSTOP)
    opened = w.opened()
    assert opened["kind"] == "agent_down"
    assert probe_ok(opened)["ssh"] is True
    os.kill(w.agent.pid, signal.SIGCONT)
    done = w.resolved()
    assert done["resolution"] == "agent_recovered"
    assert_webhooks(w, done)


def test_network_cut_is_unreachable_then_network_partition(world: World) -> None:
    w = world
    w.ns.link_down()
    opened = w.opened()
    assert opened["kind"] == "unreachable"
    assert probe_ok(opened)["ssh"] is False
    w.ns.link_up()
    done = w.resolved()
    assert done["resolution"] == "network_partition"
    assert done["stall_s"] is None
    # The agent kept sampling during the cut and replayed: its samples cover the silence.
    since, until = done["last_heartbeat_at"] - 1, done["returned_at"]
    got = w.api(f"/api/v1/hosts/{HOST}/samples?since={since}&until={until}")["samples"]
    ts = [s["ts"] for s in got]
    assert ts and ts[-1] >= until - 2 * INTERVAL_S
    assert max(b - a for a, b in itertools.pairwise(ts)) < 3 * INTERVAL_S
    assert any(s["received_at"] >= until - 0.01 for s in got)  # replayed after the return
    # A POST caught in the cut arrives late (TCP resends it): its delay is not a clock offset.
    assert abs(w.api(f"/api/v1/hosts/{HOST}")["clock_offset_s"]) < SKEW_MIN_S
    assert_webhooks(w, done)


def test_whole_host_stall_is_stall_with_its_length(world: World) -> None:
    w = world
    stopped_at = time.monotonic()
    w.signal_all(signal.SIGSTOP)
    opened = w.opened()
    assert opened["kind"] == "unreachable"  # the kernel answers TCP, sshd does not
    assert probe_ok(opened)["ssh"] is False
    time.sleep(max(0.0, stopped_at + STALL_S - time.monotonic()))  # the stall's length
    w.signal_all(signal.SIGCONT)
    done = w.resolved()
    assert done["resolution"] == "stall"
    assert STALL_S - 0.5 <= done["stall_s"] <= STALL_S + 2.0
    assert_webhooks(w, done)
