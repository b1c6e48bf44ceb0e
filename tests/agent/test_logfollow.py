"""FileFollowSource (tail -F semantics) and JournalUnitSource with a stand-in journalctl."""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.inotify import FileWaiter, PollWaiter
from agent.sources.logfollow import FileFollowSource, JournalUnitSource, journal_line

LOAD = "(EngineCore pid=168) INFO 05-14 08:21:00 [gpu_model_runner.py:4790] Starting to load model"
FAIL = "(EngineCore pid=168) ERROR 05-14 08:23:40 [core.py:700] EngineCore failed to start."


class Runner:
    """Runs a LineSource in a thread; lines arrive on a queue."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=source.run, args=(self.lines.put, self.stop))
        self.thread.start()

    def next(self) -> dict[str, Any]:
        return self.lines.get(timeout=5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.fixture(params=["inotify", "poll"])
def follow(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Runner]]:
    path = tmp_path / "vllm.log"
    path.write_text("old line before start\n")
    factory = FileWaiter if request.param == "inotify" else (lambda p: PollWaiter(0.02))
    runner = Runner(FileFollowSource(str(path), clock=lambda: 5.0, waiter_factory=factory))
    assert runner.source.ready.wait(5)
    yield path, runner
    runner.close()


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_follows_from_the_end_across_partial_lines(follow: tuple[Path, Runner]) -> None:
    path, runner = follow
    append(path, LOAD[:20])
    append(path, LOAD[20:] + "\n")
    line = runner.next()
    assert line == {
        "ts": 5.0,
        "source": "vllm",
        "priority": 6,
        "text": LOAD,
        "fields": {"file": str(path)},
    }
    assert runner.lines.empty()


def test_rotation_and_truncation(follow: tuple[Path, Runner]) -> None:
    path, runner = follow
    append(path, "first\n")
    assert runner.next()["text"] == "first"
    append(path, "last in old file\n")
    os.rename(path, path.with_suffix(".log.1"))
    path.write_text(FAIL + "\n")
    texts = [runner.next()["text"], runner.next()["text"]]
    assert texts == ["last in old file", FAIL]
    path.write_text("")  # copytruncate
    append(path, "after truncate\n")
    assert runner.next()["text"] == "after truncate"


def test_journal_line_shapes() -> None:
    entry = {
        "__CURSOR": "s=1;i=2",
        "__REALTIME_TIMESTAMP": "1764400001250000",
        "PRIORITY": "3",
        "_PID": "812",
        "SYSLOG_IDENTIFIER": "vllm",
        "MESSAGE": [0x4E, 0x56, 0xFF, 0x0A],
    }
    assert journal_line(entry, "vllm", "vllm.service") == {
        "ts": 1764400001.25,
        "source": "vllm",
        "priority": 3,
        "text": "NV\ufffd",
        "fields": {"unit": "vllm.service", "pid": "812", "identifier": "vllm"},
    }
    assert journal_line({"MESSAGE": "x"}, "vllm", "u") is None


STANDIN = """#!{python}
import json, sys, time
log = {log!r}
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
runs = sum(1 for _ in open(log))
def entry(i, msg):
    ts = str(1764400000000000 + i)
    return json.dumps({{"__CURSOR": "s=abc;i=%x" % i, "__REALTIME_TIMESTAMP": ts,
                        "PRIORITY": "6", "_PID": "812", "MESSAGE": msg}})
if runs == 1:
    print(entry(1, "Starting to load model"), flush=True)
    print("-- No entries --", flush=True)
    print(entry(2, "Loading weights took 126.18 seconds"), flush=True)
    sys.exit(1)
print(entry(3, "Application startup complete."), flush=True)
time.sleep(60)
"""


def test_journal_unit_restarts_from_the_last_cursor(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "journalctl"
    script.write_text(STANDIN.format(python=sys.executable, log=str(calls)))
    script.chmod(0o755)
    events: list[tuple[str, dict[str, Any]]] = []
    source = JournalUnitSource(
        "vllm.service",
        journalctl=str(script),
        on_event=lambda kind, data: events.append((kind, data)),
        backoff=(0.01,),
    )
    runner = Runner(source)
    texts = [runner.next()["text"] for _ in range(3)]
    runner.close()
    assert texts == [
        "Starting to load model",
        "Loading weights took 126.18 seconds",
        "Application startup complete.",
    ]
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert argvs == [
        ["-f", "-o", "json", "--no-pager", "-u", "vllm.service", "-n", "0"],
        ["-f", "-o", "json", "--no-pager", "-u", "vllm.service", "--after-cursor=s=abc;i=2"],
    ]
    assert events == [
        ("source_error", {"source": "journal_unit", "error": "journalctl exited with status 1"})
    ]


def test_missing_journalctl_reports_once(tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    source = JournalUnitSource(
        "u", journalctl=str(tmp_path / "nope"), on_event=lambda k, d: events.append((k, d))
    )
    stop = threading.Event()
    calls = iter(range(100))

    def stopping_wait(delay: float) -> bool:
        if next(calls) >= 2:
            stop.set()
        return stop.is_set()

    stop.wait = stopping_wait  # type: ignore[method-assign]
    source.run(lambda line: None, stop)
    assert len(events) == 1 and events[0][1]["error"].startswith("cannot start ")


def test_the_file_waiter_wakes_for_its_file_only(tmp_path: Path) -> None:
    log, other = tmp_path / "vllm.log", tmp_path / "collector.db"
    other.write_bytes(b"x")
    waiter = FileWaiter(str(log))  # the log does not exist yet
    try:
        append(other, "a database next to the log, written all the time\n")
        assert not waiter.wait(0.2)
        log.write_text("created\n")
        assert waiter.wait(5)
        waiter.rewatch()
        append(other, "more\n")
        assert not waiter.wait(0.2)
        append(log, "written\n")
        assert waiter.wait(5)
        os.rename(log, tmp_path / "vllm.log.1")  # rotated away
        assert waiter.wait(5)
        append(tmp_path / "vllm.log.1", "late write to the old file\n")
        assert waiter.wait(5)  # still watched until the follower moves on
        log.write_text("new file\n")
        assert waiter.wait(5)
        waiter.rewatch()
        append(tmp_path / "vllm.log.1", "the old file is not ours any more\n")
        assert not waiter.wait(0.2)
        with open(log, "r+") as f:
            f.truncate(0)  # copytruncate
        assert waiter.wait(5)
    finally:
        waiter.close()
