"""End to end: a real collector process, a real agent process and the vLLM stand-in.

The stand-in loads a drafter (MTP), prints a negative CUDA-graph estimate and appends the
driver's NV_ERR_NO_MEMORY record to the kmsg file the agent reads, at that moment. The startup
plan, its phases and the kernel event correlated with "Loading drafter model" must come back
through the API.

The agent follows the stand-in's log file (``--vllm-log``) and polls its HTTP side
(``--vllm-url``); the loading phase and the driver error put the agent in burst mode, whose
10 Hz samples arrive marked as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector import db
from collector.hosts import registry as hosts
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PROC = ROOT / "tests/fixtures/proc"
BOOT = (PROC / "sys/kernel/random/boot_id").read_text().strip()
ADMIN = "fwa_e2e-admin-token-631Mg8ye5-IS-i4Cz2Csv8htmYF8gMxM"
HOST = "spark-e2e"


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Processes:
    """Started processes, each with its log file; all killed at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=log,
            stderr=log,
        )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop()


def test_plan_phases_and_correlated_nv_err_through_the_api(
    tmp_path: Path, processes: Processes
) -> None:
    db_url = f"sqlite:///{tmp_path / 'fw.db'}"
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        _host, token = hosts.create_host(session, name=HOST)
    engine.dispose()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    processes.start(
        "collector",
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
        {
            "FREEZEWATCH_DB_URL": db_url,
            "FREEZEWATCH_PORT": str(port),
            "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
        },
    )
    wait_for(lambda: _healthy(url), what="collector /healthz")

    kmsg, vllm_log = tmp_path / "kmsg", tmp_path / "vllm.log"
    kmsg.write_bytes(b"6,1,1000,-;Linux version 6.11.0-1016-nvidia (buildd@ubuntu)\n")
    vllm_log.touch()
    vllm_port = free_port()
    processes.start(
        "agent",
        [
            sys.executable,
            "-m",
            "agent",
            "--collector",
            url,
            "--host-name",
            HOST,
            "--interval",
            "0.5",
            "--kmsg",
            str(kmsg),
            "--proc-root",
            str(PROC),
            "--state-dir",
            str(tmp_path / "state"),
            "--vllm-log",
            str(vllm_log),
            "--vllm-url",
            f"http://127.0.0.1:{vllm_port}",
            "--no-gpu",
            "--container-label",
            "",
            "--docker-socket",
            str(tmp_path / "no-docker.sock"),
            "--canary-interval",
            "0",
        ],
        {"FREEZEWATCH_AGENT_TOKEN": token},
    )
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    wait_for(
        lambda: admin.get(f"/api/v1/hosts/{HOST}/lines", params={"source": "kmsg"}).json()["lines"],
        what="the agent's first kernel line",
    )

    processes.start(
        "vllm",
        [
            sys.executable,
            "-m",
            "tests.support.vllm_standin",
            "--port",
            str(vllm_port),
            "--speculative-config",
            json.dumps({"method": "mtp", "num_speculative_tokens": 3}),
            "--kmsg-file",
            str(kmsg),
            "--log-file",
            str(vllm_log),
            "--load-seconds",
            "1",
        ],
        {},
    )
    try:
        status = wait_for(
            lambda: _serving(admin.get(f"/api/v1/hosts/{HOST}/vllm").json()),
            what="the vLLM start to reach serving",
        )
        events = wait_for(
            lambda: admin.get(f"/api/v1/hosts/{HOST}/events", params={"kind": "nv_err"}).json()[
                "events"
            ],
            what="the NV_ERR_NO_MEMORY kernel event",
        )
        burst = wait_for(
            lambda: _at_least(
                10,
                [
                    x
                    for x in admin.get(
                        f"/api/v1/hosts/{HOST}/samples", params={"limit": 2000}
                    ).json()["samples"]
                    if x["burst"]
                ],
            ),
            what="burst samples",
        )
        health = wait_for(
            lambda: [
                e
                for e in admin.get(f"/api/v1/hosts/{HOST}/vllm").json()["health"]["endpoints"]
                if e.get("health") == 200
            ],
            what="vLLM /health 200 polled by the agent",
        )
    finally:
        admin.close()

    plan = status["plan"]
    assert plan["drafter_loaded"] is True and plan["vllm_version"] == "0.33.0"
    assert plan["cuda_graph_estimate_gib"] == -0.9
    assert plan["anomalies"] == ["negative CUDA graph memory estimate: -0.9 GiB"]
    assert plan["model_load_gib"] == 23.43 and plan["kv_cache_tokens"] > 0
    assert plan["max_concurrency_tokens"] == 262144 and plan["outcome"] == "started"
    assert [p["phase"] for p in plan["phases"]] == [
        "starting",
        "loading_weights",
        "loading_drafter",
        "profiling",
        "capturing_cuda_graphs",
        "serving",
    ]
    (event,) = events
    assert event["nv_err"] == "NV_ERR_NO_MEMORY" and event["gpu_fault"] is True
    assert event["call_site"] == "_memdescAllocInternal @ mem_desc.c:1359"
    assert event["line"]["source"] == "kmsg" and "NV_ERR_NO_MEMORY" in event["line"]["text"]
    assert event["vllm"]["phase"] == "loading_drafter"
    assert "Loading drafter model" in event["vllm"]["line"]
    assert abs(event["vllm"]["line_ts"] - event["ts"]) <= 2.0
    # Burst samples: memory and pressure at 10 Hz, marked, at least a second's worth.
    assert len(burst) >= 10
    assert all(x["mem_available"] is not None for x in burst)
    assert health[0]["url"] == f"http://127.0.0.1:{vllm_port}"


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _serving(status: dict[str, Any]) -> dict[str, Any] | None:
    plan = status.get("plan")
    return status if plan and plan["outcome"] == "started" else None


def _at_least(n: int, items: list[Any]) -> list[Any] | None:
    return items if len(items) >= n else None
