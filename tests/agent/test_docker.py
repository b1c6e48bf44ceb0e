"""DockerSource and DockerLogSource against the Docker Engine API stand-in on a unix socket."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.sources.docker import DockerSource
from agent.sources.docker_logs import DockerLogSource, demux, parse_timestamp
from tests.support.docker_standin import DockerStandin, frame

VLLM_ID = "8dfafdbc3a40"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[DockerStandin]:
    server = DockerStandin(str(tmp_path / "docker.sock"))
    yield server
    server.close()


def test_socket_absent_turns_the_source_off(tmp_path: Path) -> None:
    source, info = DockerSource.create(str(tmp_path / "none.sock"))
    assert source is None
    assert info == f"Docker source off: no socket at {tmp_path / 'none.sock'}"


def test_state_restarts_oom_and_memory_by_label(standin: DockerStandin) -> None:
    source, info = DockerSource.create(standin.socket_path, stats_every=5)
    assert info is None and source is not None
    running, exited = source.read()
    assert running == {
        "id": VLLM_ID,
        "name": "nemoclaw-vllm",
        "image": "nvcr.io/nvidia/vllm:26.05.post1-py3",
        "state": "running",
        "restart_count": 2,
        "oom_killed": False,
        "exit_code": 0,
        "started_at": "2025-11-29T06:50:01.456789012Z",
        "mem_used": 27917287424 - 1073741824,  # usage minus inactive_file, like docker stats
        "mem_limit": 130599251968,
    }
    assert exited["state"] == "exited" and exited["oom_killed"] is True
    assert exited["exit_code"] == 137 and exited["mem_used"] is None
    for _ in range(4):
        assert source.read()[0]["mem_used"] == 26843545600  # carried between stats ticks
    stats_calls = [r for r in standin.requests if "/stats" in r]
    assert stats_calls == [f"/containers/{running_id(standin)}/stats?stream=false&one-shot=true"]
    source.read()
    assert len([r for r in standin.requests if "/stats" in r]) == 2


def running_id(standin: DockerStandin) -> str:
    return next(c for c in standin.containers if c.startswith(VLLM_ID))


def test_exact_name_selection(standin: DockerStandin) -> None:
    source = DockerSource(standin.socket_path, names=("nemoclaw-vllm",), label=None)
    # The daemon's name filter also matches "nemoclaw-vllm-worker"; only the exact name stays.
    assert [c["name"] for c in source.read()] == ["nemoclaw-vllm"]


def test_demux_frames_split_across_chunks() -> None:
    body = frame(1, b"2025-11-29T08:00:00.5Z out one\n2025-11-29T08:00:00.6Z out ")
    body += frame(2, b"2025-11-29T08:00:01Z err\n") + frame(1, b"two\n")
    chunks = iter([body[:5], body[5:30], body[30:]])
    assert list(demux(chunks, tty=False)) == [
        ("stdout", b"2025-11-29T08:00:00.5Z out one"),
        ("stderr", b"2025-11-29T08:00:01Z err"),
        ("stdout", b"2025-11-29T08:00:00.6Z out two"),
    ]
    assert list(demux(iter([b"a\nb", b"c\n"]), tty=True)) == [("stdout", b"a"), ("stdout", b"bc")]


def test_parse_timestamp_keeps_nanoseconds() -> None:
    assert parse_timestamp("2025-11-29T08:00:00.123456789Z") == 1764403200123456789
    assert parse_timestamp("2025-11-29T08:00:00Z") == 1764403200000000000
    assert parse_timestamp("no") is None


LOAD = b"(EngineCore pid=168) INFO 11-29 08:00:01 [gpu_model_runner.py:4790] Starting to load model"


def test_log_stream_lines_and_reattach_after_restart(standin: DockerStandin) -> None:
    lines: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()
    source = DockerLogSource(standin.socket_path, clock=lambda: 1764403200.0, rescan_s=0.02)
    thread = threading.Thread(target=source.run, args=(lines.put, stop))
    thread.start()
    try:
        standin.log("nemoclaw-vllm", 1, b"2025-11-29T08:00:01.250000001Z " + LOAD + b"\n")
        standin.log("nemoclaw-vllm", 2, b"2025-11-29T08:00:02.5Z Traceback (most recent")
        standin.log("nemoclaw-vllm", 2, b" call last):\n")
        first, second = lines.get(timeout=5), lines.get(timeout=5)
        assert first == {
            "ts": pytest.approx(1764403201.250000001),
            "source": "vllm",
            "priority": 6,
            "text": LOAD.decode(),
            "fields": {"container": "nemoclaw-vllm", "stream": "stdout"},
        }
        assert second["text"] == "Traceback (most recent call last):"
        assert second["fields"] == {"container": "nemoclaw-vllm", "stream": "stderr"}
        standin.end_logs("nemoclaw-vllm")  # the container restarted
        standin.log("nemoclaw-vllm", 1, b"2025-11-29T08:05:00Z INFO 11-29 08:05:00 [x.py:1] up\n")
        third = lines.get(timeout=5)
        assert third["ts"] == 1764403500.0 and third["priority"] == 6
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    # Only the running container is followed: first from the start, then after the last line.
    assert [(name, q["since"]) for name, q in standin.log_queries] == [
        ("nemoclaw-vllm", "1764403200.000000000"),
        ("nemoclaw-vllm", "1764403202.500000001"),
    ]
    assert standin.log_queries[0][1]["follow"] == "1"
    assert standin.log_queries[0][1]["timestamps"] == "1"
