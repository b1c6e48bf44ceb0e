"""VllmHttpSource against a loopback HTTP server serving a vLLM-shaped /metrics exposition
(real pastes: tests/agent/test_real_vllm_metrics.py)."""

from __future__ import annotations

import gzip
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.sources import vllm_http
from agent.sources.vllm_http import VllmHttpSource, metrics_from_text

FIXTURE = Path(__file__).parents[1] / "fixtures" / "vllm" / "metrics.txt"


class FakeVllm(http.server.ThreadingHTTPServer):
    daemon_threads = True
    health_status = 200
    connections = 0
    metrics_encoding = ""  # "gzip": /metrics answers compressed, as a proxy in front may


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        if self.path == "/health":
            body, status = b"", self.server.health_status  # type: ignore[attr-defined]
        elif self.path == "/metrics":
            body, status = FIXTURE.read_bytes(), 200
        else:
            body, status = b"not found", 404
        encoding = self.server.metrics_encoding  # type: ignore[attr-defined]
        if self.path == "/metrics" and encoding:
            body = gzip.compress(body) if encoding == "gzip" else body
        self.send_response(status)
        if self.path == "/metrics" and encoding:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def vllm() -> Iterator[FakeVllm]:
    server = FakeVllm(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_metrics_fields_from_the_exposition() -> None:
    assert metrics_from_text(FIXTURE.read_text()) == {
        "running": 2,
        "waiting": 1,
        "kv_usage": 0.0412,
        "preemptions": 3,
        "prompt_tokens": 184320,
        "generation_tokens": 52771,
        "iteration_tokens": None,
        "spec_accepted": 34719,
        "spec_draft": 48022,
    }


def test_old_kv_metric_name_and_missing_spec_counters() -> None:
    text = (
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\n'
        'vllm:num_requests_running{model_name="m"} 0.0\n'
    )
    fields = metrics_from_text(text)
    assert fields["kv_usage"] == 0.25 and fields["running"] == 0
    assert fields["spec_accepted"] is None and fields["generation_tokens"] is None


def test_data_parallel_engines_add_up_but_kv_usage_is_the_busiest_engine() -> None:
    # vLLM with --data-parallel-size 2 (0.8.5+ labels): one series per engine.
    text = (
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.71\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.64\n'
        'vllm:generation_tokens_total{engine="0",model_name="m"} 100.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="m"} 50.0\n'
        'vllm:iteration_tokens_total_sum{engine="0",model_name="m"} 8192.0\n'
        'vllm:iteration_tokens_total_sum{engine="1",model_name="m"} 4096.0\n'
    )
    fields = metrics_from_text(text)
    assert (fields["running"], fields["generation_tokens"]) == (5, 150)
    assert fields["kv_usage"] == 0.71 and fields["iteration_tokens"] == 12288


def test_health_and_metrics_over_one_kept_alive_connection(vllm: FakeVllm) -> None:
    url = f"http://127.0.0.1:{vllm.server_address[1]}"
    ticks = iter([10.0, 10.0042, 20.0, 20.001])
    source = VllmHttpSource([url], monotonic=lambda: next(ticks))
    first = source.read()
    assert first == [
        {
            "url": url,
            "health": 200,
            "health_ms": 4.2,
            "running": 2,
            "waiting": 1,
            "kv_usage": 0.0412,
            "preemptions": 3,
            "prompt_tokens": 184320,
            "generation_tokens": 52771,
            "iteration_tokens": None,
            "spec_accepted": 34719,
            "spec_draft": 48022,
            "error": None,
        }
    ]
    vllm.health_status = 503
    second = source.read()[0]
    assert second["health"] == 503 and second["health_ms"] == 1.0
    assert vllm.connections == 1  # four requests, one connection
    source.close()


def test_refused_connection_is_reported_in_the_entry_not_raised() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connect is refused
        source = VllmHttpSource([f"127.0.0.1:{port}"], timeout=0.2)
        (entry,) = source.read()
    assert entry["health"] is None and entry["running"] is None
    assert entry["error"].startswith("health: ")


def test_reconnects_after_the_server_closed_the_connection(vllm: FakeVllm) -> None:
    url = f"http://127.0.0.1:{vllm.server_address[1]}"
    source = VllmHttpSource([url])
    assert source.read()[0]["health"] == 200
    source._endpoints[0]._conn.sock.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
    assert source.read()[0]["health"] == 200
    assert vllm.connections == 2


def test_a_gzipped_metrics_answer_is_read_plain(vllm: FakeVllm) -> None:
    vllm.metrics_encoding = "gzip"
    source = VllmHttpSource([f"http://127.0.0.1:{vllm.server_address[1]}"])
    (entry,) = source.read()
    assert entry["error"] is None and entry["running"] == 2 and entry["spec_draft"] == 48022
    source.close()


def test_a_corrupt_gzip_body_is_an_error_in_the_entry(vllm: FakeVllm) -> None:
    vllm.metrics_encoding = "gzip-header-only"  # says gzip, sends plain text
    source = VllmHttpSource([f"http://127.0.0.1:{vllm.server_address[1]}"])
    (entry,) = source.read()
    assert entry["health"] == 200 and entry["running"] is None
    assert entry["error"].startswith("metrics: bad gzip body")
    source.close()


def test_a_gzip_bomb_is_refused_not_unpacked(
    vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_http, "MAX_METRICS_BYTES", 1000)  # the fixture unpacks to more
    vllm.metrics_encoding = "gzip"
    source = VllmHttpSource([f"http://127.0.0.1:{vllm.server_address[1]}"])
    (entry,) = source.read()
    assert entry["health"] == 200 and entry["running"] is None
    assert entry["error"] == "metrics: bad gzip body: over 1000 bytes unpacked"
    source.close()
