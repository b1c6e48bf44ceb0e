"""Line sources on the shipper's thread (``pump_line_source``) or a thread of their own."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from agent import threads as threads_module
from agent.outbox import Outbox
from agent.threads import pump_line_source


class FailingPump:
    """Reads a pipe once, then fails as a device read can (EIO)."""

    def __init__(self, fd: int, emit: Callable[[dict[str, Any]], None]) -> None:
        self.fd = fd
        self.emit = emit
        self.calls = 0
        self.closed = False

    def fileno(self) -> int:
        return self.fd

    def pump(self) -> bool:
        self.calls += 1
        os.read(self.fd, 100)
        if self.calls == 1:
            self.emit({"ts": 1.0, "source": "kmsg", "priority": 6, "text": "read", "kseq": 1})
            return False
        raise OSError(5, "Input/output error")

    def close(self) -> None:
        self.closed = True


class PumpableSource:
    name = "kmsg"

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pumps: list[FailingPump] = []
        self.runs = 0
        self.ran = threading.Event()

    def pump(self, emit: Callable[[dict[str, Any]], None]) -> FailingPump:
        self.pumps.append(FailingPump(self.fd, emit))
        return self.pumps[-1]

    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        self.runs += 1
        self.ran.set()
        raise OSError(5, "Input/output error")  # fails in its thread too: not reported again


class ThreadOnlySource:
    name = "vllm"

    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        stop.wait()


def test_a_source_without_a_pump_needs_a_thread() -> None:
    assert pump_line_source(ThreadOnlySource(), Outbox(), threading.Event()) is None


def test_a_pumped_source_that_fails_is_reported_once_and_goes_on_in_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads_module, "LINE_SOURCE_RETRY", 0.01)
    r, w = os.pipe()
    stop = threading.Event()
    outbox = Outbox()
    seen: list[str] = []
    source = PumpableSource(r)
    try:
        close = pump_line_source(source, outbox, stop, lambda ln: seen.append(ln["text"]))
        assert close is not None
        os.write(w, b"x")
        assert outbox.wait(30) is True
        assert seen == ["read"]  # observed first (guard, burst), then queued
        os.write(w, b"y")
        outbox.wait(30)  # the read fails: reported, the pump closed, a thread takes over
        assert source.ran.wait(30)
        (pump,) = source.pumps
        assert pump.closed and pump.calls == 2
        os.write(w, b"z")
        outbox.wait(0.05)
        assert pump.calls == 2  # no longer watched
        _, lines, events = outbox.drain(100, 1 << 20)
        assert [ln["text"] for ln in lines] == ["read"]
        assert [(e["kind"], e["data"]["error"]) for e in events] == [
            ("source_error", "OSError: [Errno 5] Input/output error")
        ]
    finally:
        stop.set()
        for thread in threading.enumerate():
            if thread.name == "kmsg":
                thread.join(30)
        os.close(r)
        os.close(w)
    assert source.runs >= 1
    _, _, events = outbox.drain(100, 1 << 20)
    assert events == []  # the thread's own failures were not reported a second time


def test_dev_kmsg_read_ahead_during_an_encoding_is_still_emitted() -> None:
    """The real /dev/kmsg: a record read ahead by ``service`` (between the slices of a big
    batch's encoding), after which the device is no longer readable, is parsed and emitted
    by the next wait, with no further kernel record to wake it."""
    from pathlib import Path

    from agent.sources.kmsg import KmsgSource

    try:
        fd = os.open("/dev/kmsg", os.O_RDWR | os.O_NONBLOCK)
    except OSError as exc:
        pytest.skip(f"/dev/kmsg cannot be read and written here: {exc}")
    tag = f"freezewatch-test {os.urandom(6).hex()}"
    outbox = Outbox()
    close = pump_line_source(KmsgSource(Path("/dev/kmsg")), outbox, threading.Event())
    assert close is not None
    try:
        while outbox.wait(0) or outbox._busy:  # the ring buffer's records so far
            outbox.drain(100_000, 1 << 30)
        os.write(fd, f"<14>{tag}\n".encode())
        outbox.service()
        texts: list[str] = []
        for _ in range(100):  # other kernel records may come meanwhile
            outbox.wait(0.05)
            texts += [ln["text"] for ln in outbox.drain(100_000, 1 << 30)[1]]
            if tag in texts:
                break
        assert tag in texts
    finally:
        close()
        os.close(fd)
