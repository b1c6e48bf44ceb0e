"""The world of a matrix campaign test: a simulated host (tests.support.simlab: a real sshd,
the real agent, in a network namespace where root has one, else on loopback), a real
collector process (`serve`, scheduler on) that can be killed and started again on the same
database, and a webhook receiver that verifies every signature."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from collector import db
from collector.hosts import registry
from tests.collector.freeze_support import SECRET, Receiver, receiver
from tests.support import netns as netns_support
from tests.support import sshd as sshd_support
from tests.support.ports import free_port
from tests.support.simlab import LabConfig, LabHost
from tests.support.skips import require
from tests.twohost import harness
from tests.twohost.harness import start_collector

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "fwa_campaign-admin-ctF07i8pJuHMI2OGVIAnFRwTA57_ClKi"
HOST = "spark-lab"
SPEC_CONFIG = '{"method":"mtp","num_speculative_tokens":3}'
COLLECTOR_ENV = {
    **harness.FAST_ENV,
    "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
    "FREEZEWATCH_MATRIX_SETTLE_S": "1",
    "FREEZEWATCH_MATRIX_LEASE_S": "3",
}
FINAL = {"succeeded", "failed", "cancelled", "interrupted"}
# The soak's tool conversation asks for tool_choice "auto", which vLLM refuses without the
# tool-call flags.
STANDIN = [sys.executable, "-m", "tests.support.vllm_standin", "--load-seconds", "0.5",
           "--request-seconds", "0.05", "--stats-interval", "60",
           "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"]  # fmt: skip


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    return harness.wait_for(predicate, timeout, 0.2, what=what)


@dataclass
class World:
    lab: LabHost
    rec: Receiver
    tmp: Path
    db_url: str
    bind: str
    collector: subprocess.Popen[bytes] | None = None
    url: str = ""
    marker: str = field(default_factory=lambda: f"fw-campaign-{uuid.uuid4().hex[:10]}")
    env: dict[str, str] = field(default_factory=dict)

    # -- the collector ----------------------------------------------------------------------
    def start_collector(self) -> None:
        env = {
            **COLLECTOR_ENV,
            "FREEZEWATCH_WEBHOOK_URLS": f"{self.rec.url}|json|{SECRET}",
            "FREEZEWATCH_DATA_DIR": str(self.tmp / "data"),
            **self.env,
        }
        # Again on the same port: the agent keeps sending where it was told.
        port = int(self.url.rpartition(":")[2]) if self.url else None
        self.collector, self.url = start_collector(
            self.db_url, self.bind, env, self.tmp / "collector.log", port
        )

    def stop_collector(self, sig: int = signal.SIGTERM) -> None:
        proc = self.collector
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def api(self, path: str, method: str = "GET", **kwargs: Any) -> Any:
        r = httpx.request(
            method, self.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10,
            **kwargs,
        )  # fmt: skip
        assert r.status_code < 300, r.text
        return (
            r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
        )

    def submit(self, spec: dict[str, Any]) -> int:
        return int(self.api("/api/v1/matrix-runs", "POST", json={"spec": spec})["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        return self.api(f"/api/v1/matrix-runs/{run_id}")  # type: ignore[no-any-return]

    def failure(self, run: dict[str, Any]) -> str:
        """What a failed run says, and the end of the collector's log (the runner logs the
        traceback of an error the run records in one line, such as a bare ``EOFError: ``)."""
        log = self.tmp / "collector.log"
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no collector log)"
        return f"{run['error']}\nsteps: {run['steps']}\ncollector log:\n{tail}"

    def finished(self, run_id: int, timeout: float = 240.0) -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: (r := self.run(run_id))["status"] in FINAL and r, "run finished", timeout
        )

    def step(self, run_id: int, profile: str, kind: str, **match: Any) -> dict[str, Any] | None:
        wanted = {"profile": profile, "kind": kind, **match}
        for s in self.run(run_id)["steps"]:
            if all(s.get(k) == v for k, v in wanted.items()):
                return s  # type: ignore[no-any-return]
        return None

    def incidents(self) -> list[dict[str, Any]]:
        return self.api(f"/api/v1/incidents?host={HOST}")  # type: ignore[no-any-return]

    def alerts(self) -> list[str]:
        """Verified incident webhooks received so far (kernel.event aside)."""
        assert self.rec.bad_signatures == 0
        events = [r["body"]["event"] for r in self.rec.received]
        return [e for e in events if e.startswith("incident.")]

    # -- the spec ---------------------------------------------------------------------------
    def spec(self, *, reboot: bool = False, soak_s: float = 2, **changes: Any) -> dict[str, Any]:
        """X (MTP: the stand-in's drafter load logs NV_ERR) and Y, a short soak each."""
        spec: dict[str, Any] = {
            "name": "campaign",
            "host": HOST,
            "launcher": {"type": "command"},
            "pre": f"cd {ROOT}",
            "base_args": [
                *STANDIN,
                "--port",
                str(free_port()),
                "--served-model-name",
                self.marker,
                "--kmsg-file",
                str(self.lab.kmsg),
            ],
            "profiles": {"X": {"add": ["--speculative-config", SPEC_CONFIG]}, "Y": {}},
            "repeat": 1,
            "cold_start": {
                "reboot_argv": self.lab.reboot_argv,
                "settle_s": 1,
                "reboot_timeout_s": 90,
                "reboot": reboot,
            },
            "freeze_wait_s": 90,
            "startup_timeout_s": 30,
            "workloads": [
                {
                    "type": "tool_conversation",
                    "name": "soak",
                    "duration_s": soak_s,
                    "max_turns": 1000,
                    "target_prompt_tokens": 10**9,
                    "request_timeout_s": 10,
                }
            ],
        }
        spec.update(changes)
        return spec

    def leftover(self) -> str:
        """Processes of this test's servers still alive on the host."""
        out = subprocess.run(["pgrep", "-af", self.marker], capture_output=True, text=True)
        return out.stdout.strip()

    def soaking(self, run_id: int, profile: str, n: int = 3) -> None:
        """Wait until ``profile``'s workload has made ``n`` requests."""

        def made() -> bool:
            path = self.tmp / "data" / "matrix" / f"run-{run_id}" / "requests.jsonl"
            if not path.exists():
                return False
            records = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            return sum(1 for r in records if r["profile"] == profile) >= n

        wait_for(made, f"{profile}'s workload running")

    def requests(self, run_id: int) -> list[dict[str, Any]]:
        text = self.api(f"/api/v1/matrix-runs/{run_id}/requests.jsonl")
        return [json.loads(line) for line in text.splitlines()]


def add_host_cli(db_url: str, lab: LabHost, *extra: str) -> None:
    """`add-host --update` with the lab's SSH settings, trusting the key it presents."""
    s = lab.sshd
    argv = [
        sys.executable, "-m", "collector", "--db", db_url, "add-host", HOST, "--update",
        "--ssh", f"{s.user}@{s.host}:{s.port}", "--key", str(s.key_path), "--trust-host-key",
        *extra,
    ]  # fmt: skip
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@contextlib.contextmanager
def campaign_world(
    tmp: Path,
    *,
    cli_extra: Callable[[LabHost], list[str]] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[World]:
    """The world, the host up; in a network namespace when root may make one. ``env``
    overrides the collector's settings."""
    ok, reason = sshd_support.available()
    require(ok, reason)
    db_url = f"sqlite:///{tmp / 'collector.db'}"
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        _host, token = registry.create_host(session, name=HOST)
    engine.dispose()
    with contextlib.ExitStack() as stack:
        ns = None
        if netns_support.available():
            ns = stack.enter_context(netns_support.NetNamespace())
        bind = ns.host_addr if ns is not None else "127.0.0.1"
        rec = stack.enter_context(receiver())
        config = LabConfig(collector="", token=token, host_name=HOST, data_dir=tmp / "lab")
        lab = LabHost(config, ns=ns)
        stack.callback(lab.close)
        lab.sshd.start()  # its key is trusted before the host boots
        add_host_cli(db_url, lab, *(cli_extra(lab) if cli_extra else []))
        world = World(lab=lab, rec=rec, tmp=tmp, db_url=db_url, bind=bind, env=dict(env or {}))
        stack.callback(world.stop_collector)
        world.start_collector()
        lab.cfg = dataclasses.replace(config, collector=world.url)
        lab.start()
        wait_for(lambda: world.api(f"/api/v1/hosts/{HOST}")["status"] == "up", "host up")
        yield world
