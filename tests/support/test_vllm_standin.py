"""The vLLM stand-in, started as a subprocess: its log, kmsg record and HTTP API."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest

from agent.kernel.classify import classify_kernel_line
from agent.sources.vllm_http import metrics_from_text
from collector.vllm.log_parser import parse_vllm_log
from tests.support.vllm_standin import Engine, Logger, parse_args

ROOT = Path(__file__).resolve().parents[2]
SPEC = '{"method":"mtp","num_speculative_tokens":3,"moe_backend":"triton"}'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]


@dataclass
class Standin:
    proc: subprocess.Popen
    url: str
    log: Path
    kmsg: Path

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def chat(self, messages: list[dict], timeout: float = 5, **extra: object) -> dict:
        body = json.dumps({"model": "m", "messages": messages, "tools": TOOLS, **extra}).encode()
        req = urllib.request.Request(
            self.url + "/v1/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, *extra: str, auto_tools: bool = True) -> Iterator[Standin]:
    port = _free_port()
    log, kmsg = tmp_path / "vllm.log", tmp_path / "kmsg.txt"
    argv = [sys.executable, "-m", "tests.support.vllm_standin", "--port", str(port)]
    argv += ["--log-file", str(log), "--kmsg-file", str(kmsg), "--load-seconds", "0.3"]
    argv += ["--stats-interval", "0.2", "--tensor-parallel-size", "1", "--trust-remote-code"]
    if auto_tools:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"]
    proc = subprocess.Popen([*argv, *extra], cwd=ROOT)
    standin = Standin(proc, f"http://127.0.0.1:{port}", log, kmsg)
    deadline = time.monotonic() + 20
    while True:
        try:
            if standin.get("/health")[0] == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"stand-in did not become healthy (exit {proc.poll()})")
        time.sleep(0.05)
    try:
        yield standin
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def spec_standin(tmp_path: Path) -> Iterator[Standin]:
    yield from _start(
        tmp_path,
        "--speculative-config",
        SPEC,
        "--max-model-len",
        "131072",
        "--malformed-tool-calls-above",
        "60",
    )


@pytest.fixture
def plain_standin(tmp_path: Path) -> Iterator[Standin]:
    yield from _start(tmp_path, "--hang-after-requests", "1")


def _metrics(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            name, labels = name_labels.split("{", 1)
            assert 'model_name="nvidia/Qwen3.6-35B-A3B-NVFP4"' in labels
            values[name] = values.get(name, 0.0) + float(value)  # a family's series summed
    return values


def test_speculative_start_plan_kmsg_and_shutdown(spec_standin: Standin) -> None:
    [plan] = parse_vllm_log(spec_standin.log.read_text().splitlines())
    assert plan.drafter_loaded is True
    assert plan.cuda_graph_estimate_gib is not None and plan.cuda_graph_estimate_gib < 0
    assert plan.anomalies and plan.outcome == "started"
    assert plan.max_concurrency_tokens == 131072 and plan.kv_cache_tokens
    assert plan.cuda_graph_pool_actual_gib is None
    # The configuration, as vLLM 0.10's engine line states it (dtype auto resolved; the KV
    # cache dtype's auto is a setting of its own).
    assert (plan.max_model_len, plan.tensor_parallel_size, plan.dtype) == (131072, 1, "bfloat16")
    assert (plan.kv_cache_dtype, plan.enforce_eager, plan.gpu_memory_utilization) == (
        "auto",
        False,
        0.7,
    )
    [record] = spec_standin.kmsg.read_text().splitlines()
    header, text = record.split(";", 1)
    assert header.split(",")[0] == "3" and header.endswith(",-")
    event = classify_kernel_line(text)
    assert event is not None and event.nv_err == "NV_ERR_NO_MEMORY"

    assert spec_standin.stop() == 0
    plan = parse_vllm_log(spec_standin.log.read_text().splitlines())[-1]
    assert plan.phase == "stopped"


def test_chat_tool_calls_and_metrics(spec_standin: Standin) -> None:
    messages = [{"role": "user", "content": "read the file"}]
    first = spec_standin.chat(messages)
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["id"].startswith("chatcmpl-tool-") and call["function"]["name"] == "read_file"
    assert set(json.loads(call["function"]["arguments"])) == {"path", "limit"}
    messages += [
        choice["message"],
        {"role": "tool", "tool_call_id": call["id"], "content": "x" * 400},
    ]
    second = spec_standin.chat(messages)
    assert second["usage"]["prompt_tokens"] > first["usage"]["prompt_tokens"] + 90
    # Above 60 prompt tokens every other turn is a call the parser cannot read: like vLLM's
    # parsers, the stand-in returns the raw text as content and no tool call.
    messages += [
        second["choices"][0]["message"],
        {"role": "tool", "tool_call_id": "t", "content": "y"},
    ]
    bad = spec_standin.chat(messages)["choices"][0]
    assert "tool_calls" not in bad["message"] and bad["finish_reason"] == "stop"
    assert bad["message"]["content"].startswith("<tool_call>")
    assert "Error in extracting tool call from response." in spec_standin.log.read_text()

    status, body = spec_standin.get("/metrics")
    m = _metrics(body.decode())
    assert status == 200
    assert m["vllm:generation_tokens_total"] == 72 and m["vllm:num_requests_running"] == 0
    assert m["vllm:prompt_tokens_total"] > 100
    assert m["vllm:spec_decode_num_accepted_tokens_total"] > 0
    # vLLM's SpecDecodingProm: drafts of num_speculative_tokens (3) each, and the accepted
    # tokens again per draft position
    assert (
        m["vllm:spec_decode_num_drafts_total"] * 3 == m["vllm:spec_decode_num_draft_tokens_total"]
    )
    per_pos = m["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
    assert per_pos == m["vllm:spec_decode_num_accepted_tokens_total"]
    assert body.decode().count("vllm:spec_decode_num_accepted_tokens_per_pos_total{") == 3
    assert {
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:spec_decode_num_draft_tokens_total",
    } <= set(m)
    status, body = spec_standin.get("/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["max_model_len"] == 131072


def test_plain_start_and_hang(plain_standin: Standin) -> None:
    [plan] = parse_vllm_log(plain_standin.log.read_text().splitlines())
    assert plan.drafter_loaded is False
    assert plan.cuda_graph_estimate_gib is not None and plan.cuda_graph_estimate_gib > 0
    assert plan.cuda_graph_pool_actual_gib is not None and plan.anomalies == []
    assert not plain_standin.kmsg.exists()
    assert "spec_decode" not in plain_standin.get("/metrics")[1].decode()

    plain_standin.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(OSError):  # the second request never finishes
        plain_standin.chat([{"role": "user", "content": "again"}], timeout=0.5)
    m = _metrics(plain_standin.get("/metrics")[1].decode())
    assert m["vllm:num_requests_running"] == 1 and m["vllm:generation_tokens_total"] == 24
    assert plain_standin.get("/health")[0] == 200  # like real vLLM: /health misses the hang
    assert plain_standin.stop() == 0


def test_plan_that_cannot_fit_fails_start(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    argv = [sys.executable, "-m", "tests.support.vllm_standin", "--port", str(_free_port())]
    argv += ["--log-file", str(log), "--load-seconds", "0", "--gpu-memory-utilization", "0.2"]
    assert subprocess.run(argv, cwd=ROOT, timeout=20).returncode == 1
    [plan] = parse_vllm_log(log.read_text().splitlines())
    assert plan.outcome == "failed"
    assert plan.error is not None and "No available memory for the cache blocks" in plan.error


def test_the_port_refuses_connections_until_the_model_is_loaded(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "vllm.log"
    argv = [sys.executable, "-m", "tests.support.vllm_standin", "--port", str(port)]
    proc = subprocess.Popen([*argv, "--log-file", str(log), "--load-seconds", "3"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 10
        while "Starting to load model" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(ConnectionRefusedError):  # not a 503: nothing listens yet
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        proc.kill()
        proc.wait()


def test_auto_tool_choice_needs_the_server_flags(tmp_path: Path) -> None:
    standins = _start(tmp_path, auto_tools=False)
    standin = next(standins)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:  # tools, so "auto" by default
            standin.chat([{"role": "user", "content": "hi"}])
        assert refused.value.code == 400
        error = json.loads(refused.value.read())["error"]
        assert error["message"] == (
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        )
        answer = standin.chat([{"role": "user", "content": "hi"}], tool_choice="none")
        assert answer["choices"][0]["message"]["content"] == "OK."
    finally:
        standins.close()


def test_stats_line_goes_quiet_when_idle(plain_standin: Standin) -> None:
    plain_standin.chat([{"role": "user", "content": "hi"}])
    time.sleep(1.5)  # stats every 0.2 s: one interval with throughput, one after, then DEBUG
    lines = [ln for ln in plain_standin.log.read_text().splitlines() if "Avg prompt" in ln]
    assert 1 <= len(lines) <= 3
    assert lines[-1].split("Avg prompt throughput: ")[1].startswith("0.0")


def test_metrics_per_engine_and_none_without_log_stats() -> None:
    dp = Engine(parse_args(["--port", "1", "--data-parallel-size", "2"]), Logger(StringIO()))
    dp.running, dp.kv_tokens, dp.generation_tokens = 4, 8192, 300
    text = dp.metrics_text()
    assert 'engine="1"' in text
    fields = metrics_from_text(text)  # the agent's own reading of it
    assert fields["running"] == 4 and fields["generation_tokens"] == 300
    assert fields["kv_usage"] == 1.0  # each engine's usage, never the sum of two
    blind = Engine(parse_args(["--port", "1", "--disable-log-stats"]), Logger(StringIO()))
    assert "vllm:" not in blind.metrics_text()
    assert set(metrics_from_text(blind.metrics_text()).values()) == {None}


def test_metrics_follow_vllm_0_10_text_format_with_whole_counts_per_engine() -> None:
    # Real vLLM (production-stack issue 617, 0.10.0): "# TYPE vllm:x_total counter", then the
    # _created samples as their own gauge; an engine never reports half a request.
    dp = Engine(parse_args(["--port", "1", "--data-parallel-size", "2"]), Logger(StringIO()))
    dp.running, dp.kv_tokens, dp.generation_tokens = 3, 8192, 301
    text = dp.metrics_text()
    assert "# TYPE vllm:generation_tokens_total counter" in text
    assert "# TYPE vllm:generation_tokens_created gauge" in text
    assert f'vllm:num_requests_running{{engine="0",model_name="{dp.name}"}} 2.0' in text
    assert f'vllm:num_requests_running{{engine="1",model_name="{dp.name}"}} 1.0' in text
    assert f'vllm:generation_tokens_total{{engine="1",model_name="{dp.name}"}} 150.0' in text
    assert metrics_from_text(text)["generation_tokens"] == 301
