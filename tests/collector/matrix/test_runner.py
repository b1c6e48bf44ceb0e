"""Matrix runs end to end: real sshd, the vLLM stand-in as the server, the real ingest API."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector import db
from collector.cli import main as collector_main
from collector.matrix import store as matrix_runs
from collector.matrix.argv import remote_argv
from collector.matrix.presets import get_preset
from collector.matrix.runner import MatrixRunner
from collector.matrix.spec import MatrixSpec
from collector.models import Host, MatrixRun
from collector.remote.commands import remote_command
from collector.remote.ssh import SSHClient
from tests.collector.conftest import Collector, make_collector
from tests.support.ports import free_port
from tests.support.sshd import TestSshd
from tests.support.vllm_standin import BYTES_PER_KV_TOKEN, GPU_TOTAL_GIB

REPO = Path(__file__).resolve().parents[3]
HOST = "spark-test"
GIB = 1024**3
BOOT = "b0e1c2d3-0000-4000-8000-000000000001"
SPEC_CONFIG = '{"method":"mtp","num_speculative_tokens":3}'


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Collector]:
    yield from make_collector(
        f"sqlite:///{tmp_path / 'fw.db'}", data_dir=str(tmp_path / "data"), matrix_settle_s=1.0
    )


def register(app: Collector, sshd: TestSshd) -> str:
    token = app.add_host(HOST)
    with db.session_scope(app.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        host = session.query(Host).filter_by(name=HOST).one()
        target = sshd.target()
        host.ssh_user, host.ssh_host, host.ssh_port = target.user, target.host, target.port
        host.ssh_key_path, host.ssh_host_key = str(target.key_path), target.known_host_key
    return token


def standin_spec(
    port: int, marker: str, kmsg: Path, *, max_turns: int = 3, request_s: float = 0.02
) -> dict[str, Any]:
    return {
        "name": "standin",
        "host": HOST,
        "launcher": {"type": "command"},
        "pre": f"cd {REPO}",
        "base_args": [
            sys.executable,
            "-m",
            "tests.support.vllm_standin",
            "--port",
            str(port),
            "--served-model-name",
            marker,
            "--kmsg-file",
            str(kmsg),
            "--load-seconds",
            "0.5",
            "--request-seconds",
            str(request_s),
            "--stats-interval",
            "60",
            # The tool conversation asks for tool_choice "auto", which vLLM refuses without them.
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "qwen3_coder",
        ],
        "profiles": {"X": {"add": ["--speculative-config", SPEC_CONFIG]}, "Y": {}},
        "startup_timeout_s": 20,
        "workloads": [
            {
                "type": "tool_conversation",
                "name": "tools",
                "max_turns": max_turns,
                "target_prompt_tokens": 10**9,
                "request_timeout_s": 10,
            }
        ],
    }


class AgentFeed:
    """Plays the host's agent through the real ingest endpoint: a sample every 0.1 s, and the
    kernel record the stand-in appends to its kmsg file, stamped with the moment it was written."""

    def __init__(self, app: Collector, token: str, kmsg: Path) -> None:
        self.app, self.token, self.kmsg = app, token, kmsg
        self.samples: list[tuple[float, int]] = []
        self.kernel_ts: float | None = None
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _post(self, samples: list[dict[str, Any]], lines: list[dict[str, Any]]) -> None:
        batch = {
            "host": HOST,
            "boot_id": BOOT,
            "agent": {"version": "test"},
            "samples": samples,
            "lines": lines,
        }
        r = self.app.client.post(
            "/api/v1/ingest", json=batch, headers={"Authorization": f"Bearer {self.token}"}
        )
        assert r.status_code == 200, r.text

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self._seq += 1
            ts = time.time()
            available = (60 * GIB) - self._seq * (1 << 20)  # falls 1 MiB per sample
            sample = {
                "seq": self._seq,
                "ts": ts,
                "mem": {"MemTotal": 128 * GIB, "MemAvailable": available},
                "psi": {"memory": {"full": {"avg10": self._seq / 100}}},
            }
            lines = []
            if self.kernel_ts is None and self.kmsg.exists():
                record = self.kmsg.read_text().strip()
                prefix, text = record.split(";", 1)
                self.kernel_ts = self.kmsg.stat().st_mtime
                lines.append(
                    {
                        "seq": self._seq,
                        "ts": self.kernel_ts,
                        "source": "kmsg",
                        "priority": 3,
                        "kseq": int(prefix.split(",")[1]),
                        "text": text,
                    }
                )
            self._post([sample], lines)
            self.samples.append((ts, available))

    def __enter__(self) -> AgentFeed:
        self._post([], [])  # the host's boot exists before the run
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_status(app: Collector, run_id: int, statuses: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = app.client.get(f"/api/v1/matrix-runs/{run_id}", headers=app.admin).json()
        if run["status"] in statuses:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} still {run['status']}")


def leftover(marker: str) -> str:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return out.stdout.strip()


def kv_gib(model_gib: float, estimate: float) -> float:
    return round(0.7 * GPU_TOTAL_GIB - model_gib - 2.5 - max(estimate, 0), 2)


def test_two_profile_matrix(app: Collector, sshd: TestSshd, tmp_path: Path) -> None:
    token = register(app, sshd)
    marker = f"fw-matrix-{uuid.uuid4().hex[:12]}"
    kmsg = tmp_path / "kmsg"
    spec = standin_spec(free_port(), marker, kmsg)
    with AgentFeed(app, token, kmsg) as feed:
        r = app.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=app.admin)
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        run = wait_status(app, run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    assert leftover(marker) == ""

    kinds = [(s["profile"], s["kind"], s["outcome"]) for s in run["steps"]]
    assert kinds == [(p, k, "ok") for p in "XY" for k in ("start", "health", "workload", "stop")]
    report = app.client.get(f"/api/v1/matrix-runs/{run_id}/report.json", headers=app.admin).json()
    x, y = report["profiles"]
    assert (x["profile"], y["profile"]) == ("X", "Y")
    assert x["startup_plan"] == {
        "model_load_gib": 23.43,
        "drafter_loaded": True,
        "cuda_graph_estimate_gib": -0.9,
        "kv_cache_gib": kv_gib(23.43, -0.9),
        "kv_cache_tokens": int(kv_gib(23.43, -0.9) * 2**30 / BYTES_PER_KV_TOKEN),
        "max_concurrency": pytest.approx(
            int(kv_gib(23.43, -0.9) * 2**30 / BYTES_PER_KV_TOKEN) / 262144, abs=0.01
        ),
        # The serving configuration, from the stand-in's non-default args and engine line
        # (kv_cache_dtype=auto is a setting; V1's engine line has no data parallel size).
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "data_parallel_size": None,
        "max_model_len": 262144,
        "gpu_memory_utilization": 0.7,
        "dtype": "bfloat16",
        "quantization": None,
        "kv_cache_dtype": "auto",
        "enforce_eager": False,
        "max_num_seqs": None,
        "max_num_batched_tokens": None,
        "enable_chunked_prefill": None,
        "enable_prefix_caching": None,
        "attention_backend": None,
        "speculative_method": "mtp",
        "num_speculative_tokens": 3,
    }
    # X's --speculative-config, as vLLM's log states it.
    assert x["requested"] == {"speculative_method": "mtp", "num_speculative_tokens": 3}
    assert x["config_mismatch"] == {}
    assert y["startup_plan"]["drafter_loaded"] is False
    assert y["startup_plan"]["model_load_gib"] == 21.9
    assert y["startup_plan"]["kv_cache_gib"] == kv_gib(21.9, 0.62)

    # The driver error landed in X's startup window, and only there.
    assert feed.kernel_ts is not None
    assert x["startup"]["started_at"] <= feed.kernel_ts <= x["startup"]["healthy_at"]
    assert x["kernel_events"] == {"startup": {"nv_err": 1}, "tools": {}}
    assert y["kernel_events"] == {"startup": {}, "tools": {}}
    assert x["verdict"] == "FAIL"
    assert x["reasons"] == ["kernel events during startup: nv_err x1"]
    assert (y["verdict"], y["reasons"]) == ("PASS", [])

    for profile in (x, y):
        (workload,) = profile["workloads"]
        assert (workload["requests"], workload["errors"], workload["outcome"]) == (3, 0, "ok")
        window = profile["telemetry"]["tools"]
        inside = [
            a for ts, a in feed.samples if workload["started_at"] <= ts <= workload["ended_at"]
        ]
        assert window["samples"] == len(inside) > 0
        assert window["min_mem_available_gib"] == min(inside) / GIB
        assert window["max_used_gib"] == (128 * GIB - min(inside)) / GIB

    md = app.client.get(f"/api/v1/matrix-runs/{run_id}/report.md", headers=app.admin).text
    assert "### Startup memory plan" in md and "| X |" in md and "FAIL" in md

    records = [
        json.loads(line)
        for line in app.client.get(
            f"/api/v1/matrix-runs/{run_id}/requests.jsonl", headers=app.admin
        ).text.splitlines()
    ]
    assert [(r["profile"], r["turn"]) for r in records] == [(p, t) for p in "XY" for t in (1, 2, 3)]
    assert {r["run_id"] for r in records} == {run_id}

    # The server's log is in the store as the host's vLLM lines, tagged with run and profile.
    lines = app.client.get(
        f"/api/v1/hosts/{HOST}/lines", params={"source": "vllm", "limit": 500}, headers=app.admin
    ).json()["lines"]
    drafter = [ln for ln in lines if "Loading drafter model" in ln["text"]]
    assert len(drafter) == 1
    assert drafter[0]["fields"]["profile"] == "X"
    assert drafter[0]["fields"]["matrix_run"] == run_id

    listed = app.client.get("/api/v1/matrix-runs", headers=app.admin).json()
    assert [(r["id"], r["status"], r["host"]) for r in listed] == [(run_id, "succeeded", HOST)]


PINNING_WRAPPER = """#!/bin/sh
# A site launch script around the server: passes the matrix's args on and pins its own memory
# share after them (vLLM's argparse keeps the last value given).
exec "$@" --gpu-memory-utilization 0.6
"""


def behind_launch_script(spec: dict[str, Any], where: Path) -> dict[str, Any]:
    """The spec with its server started through PINNING_WRAPPER (written into where)."""
    wrapper = where / "launch-vllm"
    wrapper.write_text(PINNING_WRAPPER)
    wrapper.chmod(0o755)
    return {**spec, "base_args": [str(wrapper), *spec["base_args"]]}


@pytest.fixture
def any_db_app(db_url: str, tmp_path: Path) -> Iterator[Collector]:
    yield from make_collector(db_url, data_dir=str(tmp_path / "data"), matrix_settle_s=1.0)


def test_the_comparison_states_what_vllm_ran_with_next_to_the_spec(
    any_db_app: Collector, sshd: TestSshd, tmp_path: Path
) -> None:
    """A: the base; B asks for fp8 KV cache, a shorter context, eager mode and a 0.7 memory
    share, which the host's launch script overrides to 0.6: the report carries vLLM's values,
    the spec's asks, and the one they disagree on."""
    app = any_db_app
    token = register(app, sshd)
    marker = f"fw-matrix-{uuid.uuid4().hex[:12]}"
    spec = standin_spec(free_port(), marker, tmp_path / "kmsg", max_turns=1)
    spec = behind_launch_script(spec, tmp_path)
    b_set = {
        "--kv-cache-dtype": "fp8",
        "--max-model-len": "128K",
        "--gpu-memory-utilization": "0.7",
    }
    spec["profiles"] = {"A": {}, "B": {"set": b_set, "add": ["--enforce-eager"]}}
    with AgentFeed(app, token, tmp_path / "kmsg"):
        r = app.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=app.admin)
        assert r.status_code == 201, r.text
        run = wait_status(app, r.json()["id"], {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    a, b = run["report"]["profiles"]
    served = ("max_model_len", "gpu_memory_utilization", "dtype", "kv_cache_dtype")
    assert [a["startup_plan"][k] for k in served] == [262144, 0.6, "bfloat16", "auto"]
    assert [b["startup_plan"][k] for k in served] == [131072, 0.6, "bfloat16", "fp8"]
    assert (a["startup_plan"]["enforce_eager"], b["startup_plan"]["enforce_eager"]) == (False, True)
    assert (a["requested"], a["config_mismatch"]) == ({}, {})
    assert b["requested"] == {
        "kv_cache_dtype": "fp8",
        "max_model_len": 131072,
        "gpu_memory_utilization": 0.7,
        "enforce_eager": True,
    }
    assert b["config_mismatch"] == {"gpu_memory_utilization": {"requested": 0.7, "reported": 0.6}}

    summary = run["report"]["summary"]
    rows = {row["profile"]: row for row in summary["profiles"]}
    assert rows["B"]["config"]["kv_cache_dtype"] == ["fp8"]
    assert rows["B"]["config_mismatch"] == {"gpu_memory_utilization": {"k": 1, "n": 1}}
    (vs,) = summary["comparisons"]
    assert vs["config"] == {
        "max_model_len": {"value": [131072], "baseline": [262144]},
        "kv_cache_dtype": {"value": ["fp8"], "baseline": ["auto"]},
        "enforce_eager": {"value": [True], "baseline": [False]},
    }
    md = app.client.get(f"/api/v1/matrix-runs/{run['id']}/report.md", headers=app.admin).text
    section = md.split("### Serving configuration (as vLLM's log states it)\n\n")[1]
    assert section.splitlines()[2:4] == [
        "| A | 1 | 1 | 262,144 | 0.6 | bfloat16 | auto | no |",
        "| B | 1 | 1 | 131,072 | 0.6 (spec: 0.7) | bfloat16 | fp8 | yes |",
    ]


def test_cancel_mid_workload_kills_everything(
    app: Collector, sshd: TestSshd, tmp_path: Path
) -> None:
    register(app, sshd)
    marker = f"fw-matrix-{uuid.uuid4().hex[:12]}"
    spec = standin_spec(free_port(), marker, tmp_path / "kmsg", max_turns=1000, request_s=0.2)
    r = app.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=app.admin)
    run_id = r.json()["id"]
    deadline = time.monotonic() + 30
    jsonl = tmp_path / "data" / "matrix" / f"run-{run_id}" / "requests.jsonl"
    while not (jsonl.exists() and jsonl.read_text().count("\n") >= 2):
        assert time.monotonic() < deadline, "workload never started"
        time.sleep(0.1)
    assert leftover(marker) != ""
    r = app.client.post(f"/api/v1/matrix-runs/{run_id}/cancel", headers=app.admin)
    assert r.status_code == 200
    run = wait_status(app, run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "cancelled"
    assert leftover(marker) == ""
    steps = [(s["profile"], s["kind"], s["outcome"]) for s in run["steps"]]
    assert steps == [
        ("X", "start", "ok"),
        ("X", "health", "ok"),
        ("X", "workload", "cancelled"),
        ("X", "stop", "ok"),
    ]
    again = app.client.post(f"/api/v1/matrix-runs/{run_id}/cancel", headers=app.admin)
    assert again.status_code == 409


def cli(argv: list[str]) -> str:
    """``freezewatch-collector ARGV``'s one line of output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert collector_main(argv) == 0
    return out.getvalue().removesuffix("\n")


DOCKER_SCRIPT = """#!/bin/sh
{python} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@" >> {log}
if [ "$1" = run ]; then
  while [ "$#" -gt 0 ] && [ "$1" != "-lc" ]; do shift; done
  exec /bin/sh -c "$2"
fi
exit 0
"""


RECORD_ONLY = """#!/bin/sh
{python} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@" >> {log}
"""


class RecordingSSH(SSHClient):
    """The real SSH layer, remembering each argv started in a process group."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started: list[list[str]] = []

    def start_group(self, target: Any, argv: Any, **kwargs: Any) -> Any:
        self.started.append(list(argv))
        return super().start_group(target, argv, **kwargs)


def test_docker_launcher_runs_the_recorded_argv(
    app: Collector, sshd: TestSshd, tmp_path: Path
) -> None:
    """What the runner starts is what ``matrix argv`` prints: the same exec request, and the
    printed line run through the host's shell hands docker the same argv, the volume from
    ``~`` in the SSH user's home (the test sshd's ``$HOME``)."""
    register(app, sshd)
    marker = f"fw-matrix-{uuid.uuid4().hex[:12]}"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argv_log = tmp_path / "docker-argv.jsonl"
    docker = bindir / "docker"
    docker.write_text(DOCKER_SCRIPT.format(python=sys.executable, log=argv_log))
    docker.chmod(0o755)
    port = free_port()
    data = standin_spec(port, marker, tmp_path / "kmsg", max_turns=2)
    data["base_args"] = data["base_args"][:]
    data["launcher"] = {
        "type": "docker",
        "image": "nvcr.io/nvidia/vllm:test",
        "container_name": marker,
        "volumes": ["~/.cache/huggingface:/root/.cache/huggingface"],
        "labels": {"com.nvidia.nemoclaw.managed-vllm": "true"},
        "port": port,
    }
    data["profiles"] = {"X": {"add": ["--speculative-config", SPEC_CONFIG]}}
    spec = MatrixSpec.model_validate(data)
    factory = app.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        run_id = matrix_runs.create_run(session, spec=spec).id
    ssh = RecordingSSH(env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin"})
    runner = MatrixRunner(factory, data_dir=tmp_path / "data", ssh=ssh, settle_s=0)
    try:
        assert runner.execute(run_id) == "succeeded"
    finally:
        runner.shutdown()
    assert leftover(marker) == ""
    calls = [json.loads(line) for line in argv_log.read_text().splitlines()]
    remove = ["rm", "-f", marker]
    home = f"{sshd.home}/.cache/huggingface:/root/.cache/huggingface"
    assert calls[0] == calls[2] == remove
    assert calls[1][:2] == ["run", "--pull=never"] and calls[1][calls[1].index("-v") + 1] == home
    expected = remote_argv(spec, "X")
    assert [str(sshd.home) + a[1:] if a.startswith("~") else a for a in expected[1:]] == calls[1]

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(data))
    [started] = [argv for argv in ssh.started if argv[:2] == ["docker", "run"]]
    assert cli(["matrix", "argv", str(spec_file), "X", "--exec"]) == remote_command(started)
    line = cli(["matrix", "argv", str(spec_file), "X"])
    recbin, rec_log = tmp_path / "recbin", tmp_path / "cli-argv.jsonl"
    recbin.mkdir()
    (recbin / "docker").write_text(RECORD_ONLY.format(python=sys.executable, log=rec_log))
    (recbin / "docker").chmod(0o755)
    path = {"PATH": f"{recbin}:/usr/local/bin:/usr/bin:/bin"}
    result = SSHClient(env=path).run(sshd.target(), ["sh", "-c", line], timeout=30)
    assert result.exit_status == 0, result.stderr
    assert [json.loads(x) for x in rec_log.read_text().splitlines()] == [calls[1]]
    with db.session_scope(factory) as session:
        run = session.get(MatrixRun, run_id)
        assert run is not None and run.report is not None
        (profile,) = run.report["profiles"]
    assert profile["startup_plan"]["drafter_loaded"] is True
    assert profile["workloads"][0]["requests"] == 2


def test_spec_errors_are_422_with_field_paths(app: Collector) -> None:
    spec = {"host": HOST, "launcher": {"type": "command"}, "base_args": [], "profiles": {}}
    r = app.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=app.admin)
    assert r.status_code == 422
    locs = {tuple(e["loc"]) for e in r.json()["errors"]}
    assert {("spec", "base_args"), ("spec", "profiles")} <= locs
    r = app.client.post(
        "/api/v1/matrix-runs", json={"preset": "nope", "host": HOST}, headers=app.admin
    )
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["preset"]
    r = app.client.post(
        "/api/v1/matrix-runs", json={"preset": "nemoclaw-spark-qwen"}, headers=app.admin
    )
    assert r.status_code == 422
    assert app.client.post("/api/v1/matrix-runs", json={"spec": spec}).status_code == 401
    docker = {"type": "docker", "image": "--privileged", "container_name": "c"}
    spec = {"host": HOST, "launcher": docker, "base_args": ["vllm"], "profiles": {"A": {}}}
    r = app.client.post("/api/v1/matrix-runs", json={"spec": spec}, headers=app.admin)
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["loc"] == ["spec", "launcher", "docker", "image"]
    assert "must not start with '-'" in error["msg"]


def test_a_run_on_a_host_without_ssh_is_422_saying_how_to_add_it(app: Collector) -> None:
    app.add_host(HOST)
    body = {"preset": "nemoclaw-spark-qwen", "host": HOST}
    r = app.client.post("/api/v1/matrix-runs", json=body, headers=app.admin)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "no SSH settings" in detail
    assert f"add-host {HOST} --update --ssh USER@ADDR --key PATH --trust-host-key" in detail
    assert app.client.get("/api/v1/matrix-runs", headers=app.admin).json() == []


def test_a_run_whose_host_lost_its_ssh_settings_cannot_resume(tmp_path: Path) -> None:
    """Taken over after a restart, a run that cannot go on ends `interrupted`, saying why."""
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    spec = get_preset("nemoclaw-spark-qwen", HOST)
    for collector in make_collector(url, data_dir=str(tmp_path / "data")):
        collector.add_host(HOST)
        with db.session_scope(collector.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
            run = matrix_runs.create_run(session, spec=spec)
            run.status = "running"
    for collector in make_collector(url, data_dir=str(tmp_path / "data")):
        run_json = wait_status(collector, run.id, {"interrupted", "failed"})
        assert run_json["status"] == "interrupted"
        assert run_json["error"].startswith("cannot resume after a collector restart")
        assert "no SSH settings" in run_json["error"]
