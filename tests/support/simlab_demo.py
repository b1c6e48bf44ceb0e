"""The demo's matrix campaign: a simulated host behind a throwaway sshd, two profiles x two
repetitions with a reboot before every start, and one freeze in the middle that the run
survives and reports.

    python -m tests.support.simlab_demo --collector URL --token T --host-name NAME --data-dir DIR
        [--quick]

The admin token comes from FREEZEWATCH_ADMIN_TOKEN (``collector demo`` sets it). Without
openssh-server (or root, which the throwaway sshd needs to log in by key) it says how to get
the campaign and exits 0. Runs until SIGTERM/SIGINT. Production code never imports this.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.ports import free_port
from tests.support.simlab import LabConfig, LabHost
from tests.support.sshd import available

ROOT = Path(__file__).resolve().parents[2]
MODEL = "nvidia/Qwen3.6-35B-A3B-NVFP4"
SPEC_CONFIG = '{"method":"mtp","num_speculative_tokens":3,"moe_backend":"triton"}'
FROZEN_S = 10.0  # how long the host stays frozen before it is reset


def campaign_spec(lab: LabHost, host: str, *, quick: bool) -> dict[str, Any]:
    soak_s, load_s, settle_s = (3, 1, 2) if quick else (20, 6, 5)
    return {
        "name": "demo-campaign",
        "host": host,
        "launcher": {"type": "command"},
        "pre": f"cd {ROOT}",
        "base_args": [
            sys.executable,
            "-m",
            "tests.support.vllm_standin",
            "--port",
            str(free_port()),
            "--served-model-name",
            MODEL,
            "--max-model-len",
            "262144",
            "--gpu-memory-utilization",
            "0.9",
            "--kmsg-file",
            str(lab.kmsg),
            "--load-seconds",
            str(load_s),
            "--request-seconds",
            "0.3",
            "--stats-interval",
            "5",
            # The soak's tool conversation asks for tool_choice "auto", which vLLM refuses
            # without the tool-call flags.
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "qwen3_coder",
        ],
        "profiles": {
            "mtp-on": {"description": "MTP on", "add": ["--speculative-config", SPEC_CONFIG]},
            "mtp-off": {"description": "MTP off"},
        },
        "repeat": 2,
        "cold_start": {
            "reboot": True,
            "reboot_argv": lab.reboot_argv,
            "settle_s": settle_s,
            "reboot_timeout_s": 300,
        },
        "freeze_wait_s": 300,
        "startup_timeout_s": 120,
        "workloads": [
            {
                "type": "tool_conversation",
                "name": "soak",
                "sessions": 2,
                "duration_s": soak_s,
                "target_prompt_tokens": 20000,
                "max_turns": 40,
                "request_timeout_s": 60,
            },
        ],
    }


class Campaign:
    def __init__(self, args: argparse.Namespace, admin: str) -> None:
        self.args = args
        self.api = httpx.Client(
            base_url=args.collector, headers={"Authorization": f"Bearer {admin}"}, timeout=30
        )
        boot_s = 4.0 if args.quick else 8.0
        self.lab = LabHost(
            LabConfig(collector=args.collector, token=args.token, host_name=args.host_name,
                      data_dir=args.data_dir, interval=1.0, boot_seconds=boot_s)
        )  # fmt: skip
        self.froze = False

    def start(self) -> int:
        lab, name = self.lab, self.args.host_name
        lab.sshd.start()
        self.api.patch(f"/api/v1/hosts/{name}", json=lab.ssh_settings()).raise_for_status()
        lab.start()
        self._wait(lambda: self.api.get(f"/api/v1/hosts/{name}").json()["status"] == "up")
        spec = campaign_spec(lab, name, quick=self.args.quick)
        r = self.api.post("/api/v1/matrix-runs", json={"spec": spec})
        r.raise_for_status()
        run_id = int(r.json()["id"])
        print(
            f"demo campaign: matrix run {run_id} on {name} (2 profiles x 2 repetitions, a reboot "
            f"before each start, one freeze): {self.args.collector}/matrix/{run_id}",
            flush=True,
        )
        return run_id

    def _wait(self, check: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError("the simulated host did not come up")
            time.sleep(0.5)

    def tick(self, run_id: int) -> str:
        """Freeze the host once, in the middle (the second unit's workload); the run's status."""
        run = self.api.get(f"/api/v1/matrix-runs/{run_id}").json()
        busy = [s for s in run["steps"] if s["ended_at"] is None and s["kind"] == "workload"]
        if not self.froze and busy and busy[0]["profile"] == "mtp-off":
            self.froze = True
            self.lab.freeze()
            timer = threading.Timer(FROZEN_S, self.lab.crash_and_boot)
            timer.daemon = True
            timer.start()
        return str(run["status"])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="simlab_demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--collector", required=True)
    p.add_argument("--token", required=True, help="the simulated host's agent token")
    p.add_argument("--host-name", required=True)
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--quick", action="store_true", help="short soaks and boots (tests)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ok, reason = available()
    if not ok:
        print(
            f"demo campaign: not started ({reason}). With openssh-server installed "
            "(`sudo apt install openssh-server`) and `make demo` run as root, the demo also "
            f"runs a matrix campaign against {args.host_name}: reboots, a freeze, k-of-N report.",
            flush=True,
        )
        return 0
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    campaign = Campaign(args, os.environ.get("FREEZEWATCH_ADMIN_TOKEN", ""))
    try:
        run_id = campaign.start()
        status = "queued"
        while not stop.wait(1.0) and status in ("queued", "running"):
            try:
                status = campaign.tick(run_id)
            except httpx.HTTPError as exc:  # a busy collector answers late: ask again
                print(f"demo campaign: {exc!r}; asking again", flush=True)
        if status not in ("queued", "running"):
            print(f"demo campaign: matrix run {run_id} {status}", flush=True)
        stop.wait()
    finally:
        campaign.lab.close()
        campaign.api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
