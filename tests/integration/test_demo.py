"""`freezewatch-collector demo` end to end: collector, this machine's agent and a simulated host.

The simulated host (tests.support.simhost) cold-starts the vLLM stand-in with a drafter, freezes
after a few seconds and reboots; the demo must show both hosts, the startup plan, the
NV_ERR_NO_MEMORY event, the new boot after the freeze, and stop every process on SIGINT.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import sshd as sshd_support
from tests.support.netns import process_table
from tests.support.ports import free_port
from tests.support.skips import require

ROOT = Path(__file__).resolve().parents[2]
SIM = "spark-sim-test"

pytestmark = pytest.mark.timeout(120)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except httpx.HTTPError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def session_members(sid: int) -> list[int]:
    """Live processes of session ``sid`` (simhost's children: own groups, same session)."""
    return [pid for pid, f in process_table().items() if int(f[3]) == sid and f[0] != "Z"]


@contextlib.contextmanager
def running_demo(
    tmp_path: Path, sims: dict[str, list[str]]
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """`collector demo` with a simulated host per entry of ``sims`` (name → argv)."""
    port = free_port()
    data = tmp_path / "demo-data"
    cmd = [sys.executable, "-m", "collector", "demo", "--data-dir", str(data), "--port", str(port)]
    for name, argv in sims.items():
        cmd += ["--simulated-host", name, "--sim-command", json.dumps(argv)]
    with open(tmp_path / "demo.log", "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the test can find (and at worst kill) all it started
        )
    try:
        yield proc, f"http://127.0.0.1:{port}", data
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for pid in session_members(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    sim = [
        sys.executable, "-m", "tests.support.simhost", "--collector", "{url}",
        "--token", "{token:" + SIM + "}", "--host-name", SIM, "--data-dir", "{data}/sim",
        "--freeze-every", "8", "--freeze-seconds", "5", "--load-seconds", "2",
    ]  # fmt: skip
    with running_demo(tmp_path, {SIM: sim}) as running:
        yield running


def test_demo_shows_both_hosts_the_sim_freeze_and_stops_cleanly(
    demo: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    proc, url, data = demo
    wait_for(lambda: httpx.get(url + "/healthz", timeout=1).status_code == 200, "/healthz")
    admin = (data / "admin-token").read_text().strip()
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=5)

    def both_sampled() -> dict[str, dict[str, Any]] | None:
        hosts = {h["name"]: h for h in api.get("/api/v1/hosts").json()}
        if len(hosts) == 2 and all(h["latest"] for h in hosts.values()):
            return hosts
        return None

    hosts = wait_for(both_sampled, "samples from both hosts")
    assert hosts[SIM]["simulated"] is True
    (real,) = [h for name, h in hosts.items() if name != SIM]
    assert real["simulated"] is False
    first_boot = hosts[SIM]["boot_id"]
    assert hosts[SIM]["latest"]["mem_total"] == 127_606_688 * 1024  # the fake Spark's meminfo

    def started_plan() -> dict[str, Any] | None:
        plan = api.get(f"/api/v1/hosts/{SIM}/vllm").json().get("plan")
        return plan if plan and plan["outcome"] == "started" else None

    plan = wait_for(started_plan, "the startup plan of a started vLLM")
    assert plan["drafter_loaded"] is True and plan["cuda_graph_estimate_gib"] == -0.9
    assert plan["max_concurrency_tokens"] == 262144
    events = wait_for(
        lambda: api.get(f"/api/v1/hosts/{SIM}/events", params={"kind": "nv_err"}).json()["events"],
        "the NV_ERR_NO_MEMORY event",
    )
    assert events[0]["nv_err"] == "NV_ERR_NO_MEMORY" and events[0]["line"]["source"] == "kmsg"

    rebooted = wait_for(
        lambda: (
            (h := api.get(f"/api/v1/hosts/{SIM}").json())["boot_id"] not in (first_boot, None) and h
        ),
        "the simulated host back with a new boot id",
    )
    assert rebooted["latest_sample"]["mem_total"] == 127_606_688 * 1024
    # the stall record written while the agent was stopped came back through the journal catch-up
    stall = api.get(f"/api/v1/hosts/{SIM}/lines", params={"q": "rcu_preempt"}).json()["lines"]
    assert stall and {line["fields"].get("via") for line in stall} == {"journal"}
    api.close()

    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    wait_for(lambda: not session_members(proc.pid), "every child to exit", 10)


LAB = "spark-lab-test"


@pytest.mark.sshd
@pytest.mark.timeout(400)
def test_demo_runs_a_campaign_through_reboots_and_a_freeze(tmp_path: Path) -> None:
    ok, reason = sshd_support.available()
    require(ok, reason)
    lab = [
        sys.executable, "-m", "tests.support.simlab_demo", "--collector", "{url}",
        "--token", "{token:" + LAB + "}", "--host-name", LAB, "--data-dir", "{data}/lab",
        "--quick",
    ]  # fmt: skip
    with running_demo(tmp_path, {LAB: lab}) as (proc, url, data):
        wait_for(lambda: httpx.get(url + "/healthz", timeout=1).status_code == 200, "/healthz")
        admin = (data / "admin-token").read_text().strip()
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=5)
        runs = wait_for(lambda: api.get("/api/v1/matrix-runs").json(), "the campaign submitted")
        run_id = runs[0]["id"]
        run = wait_for(
            lambda: (
                (r := api.get(f"/api/v1/matrix-runs/{run_id}").json())["status"]
                not in ("queued", "running")
                and r
            ),
            "the campaign finished",
            timeout=300,
        )
        assert run["status"] == "succeeded", run["error"]
        kinds = [(s["profile"], s["repetition"], s["kind"], s["outcome"]) for s in run["steps"]]
        assert [k for k in kinds if k[2] == "reboot"] == [
            (p, r, "reboot", "ok") for r in (1, 2) for p in ("mtp-on", "mtp-off")
        ]
        assert [k for k in kinds if k[3] == "host_froze"] == [
            ("mtp-off", 1, "workload", "host_froze")
        ]
        rows = {r["profile"]: r for r in run["report"]["summary"]["profiles"]}
        assert rows["mtp-off"]["freezes"]["k"] == 1 and rows["mtp-on"]["freezes"]["k"] == 0
        assert rows["mtp-on"]["kernel_events"]["nv_err"] == {"k": 2, "n": 2}
        api.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        wait_for(lambda: not session_members(proc.pid), "every child to exit", 15)
    # Ctrl-C stops the lab host's agent as systemd would: it announces its stop on its boot, so
    # the next demo (with CAMPAIGN=0 too) finds the host stopped, not silent with an incident.
    with sqlite3.connect(data / "freezewatch.db") as conn:
        announced = conn.execute(
            "SELECT s.boot_id, h.current_boot_id FROM host_silences s"
            " JOIN hosts h ON h.id = s.host_id WHERE h.name = ?",
            (LAB,),
        ).fetchall()
    assert len(announced) == 1 and announced[0][0] == announced[0][1], announced
