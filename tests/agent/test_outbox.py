"""The outbox's one wait: puts from other threads, watched descriptors read on the waiting
thread, and the collector's answer (``agent.outbox``)."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from typing import Any

import pytest

from agent.outbox import Outbox


def line(k: int) -> dict[str, object]:
    return {"ts": 1.0, "source": "kmsg", "priority": 6, "text": f"line {k}", "kseq": k}


@pytest.fixture
def pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_a_put_from_another_thread_ends_the_wait() -> None:
    outbox = Outbox()
    assert outbox.wait(0) is False
    threading.Timer(0.05, outbox.put_line, args=(line(1),)).start()
    assert outbox.wait(30) is True  # woken by the put, long before the timeout
    assert outbox.wait(0) is False  # the wake is taken once
    _, lines, _ = outbox.drain(100, 1 << 20)
    assert [ln["kseq"] for ln in lines] == [1]


def _eventfd_readable(outbox: Outbox) -> bool:
    poller = select.poll()
    poller.register(outbox._wake_fd, select.POLLIN)
    return bool(poller.poll(0))


def test_a_put_on_the_waiting_thread_itself_skips_the_eventfd() -> None:
    """A /dev/kmsg handler's lines and the shipper's own events are put on the thread that
    waits: its next wait returns at once without the eventfd's write and read (two syscalls
    a kernel line); a put from another thread still writes it, and ``wake`` always does
    (SIGTERM's handler runs on the waiting thread while its poll is resumed)."""
    outbox = Outbox()
    assert outbox.wait(0) is False  # this thread is the one that waits
    outbox.put_line(line(1))
    assert not _eventfd_readable(outbox)
    assert outbox.wait(30) is True and outbox.wait(0) is False
    outbox.drain(100, 1 << 20)
    other = threading.Thread(target=outbox.put_line, args=(line(2),))
    other.start()
    other.join()
    assert _eventfd_readable(outbox)
    assert outbox.wait(30) is True and not _eventfd_readable(outbox)
    outbox.drain(100, 1 << 20)
    outbox.wake()
    assert _eventfd_readable(outbox)
    assert outbox.wait(30) is True and not _eventfd_readable(outbox)


def test_records_left_after_a_drain_keep_the_next_wait_from_blocking() -> None:
    outbox = Outbox()
    for k in range(5):
        outbox.put_line(line(k))
    assert outbox.wait(0) is True
    _, lines, _ = outbox.drain(2, 1 << 20)
    assert len(lines) == 2
    assert outbox.wait(30) is True  # three still queued: at once
    outbox.drain(100, 1 << 20)
    assert outbox.wait(0) is False and not len(outbox)


def test_a_watched_descriptor_is_read_on_the_waiting_thread(pipe: tuple[int, int]) -> None:
    r, w = pipe
    outbox = Outbox()
    seen: list[tuple[bytes, int]] = []

    def handler() -> bool:
        seen.append((os.read(r, 100), threading.get_ident()))
        outbox.put_line(line(len(seen)))
        return False

    outbox.watch(r, handler)
    assert outbox.wait(0) is False and not seen  # nothing to read: no call
    os.write(w, b"x")
    assert outbox.wait(30) is True
    assert seen == [(b"x", threading.get_ident())]
    outbox.unwatch(r)
    os.write(w, b"y")
    assert outbox.wait(0) is False and len(seen) == 1  # unwatched: left alone


def test_a_handler_with_work_left_is_called_again_without_waiting(
    pipe: tuple[int, int],
) -> None:
    """A storm read ahead and parsed a run at a time: while the handler has work left, the
    wait does not block (the descriptor is not readable again after the first call; a wait
    that blocked would last the hour, past the test's timeout)."""
    r, w = pipe
    outbox = Outbox()
    runs = [True, True, False]

    def handler() -> bool:
        with contextlib.suppress(BlockingIOError):
            os.read(r, 100)
        return runs.pop(0)

    outbox.watch(r, handler)
    os.write(w, b"x")
    for _ in range(3):
        outbox.wait(3600)
    assert not runs


def test_waiting_for_the_answer_reads_watched_descriptors_meanwhile(
    pipe: tuple[int, int],
) -> None:
    r, w = pipe
    answer_r, answer_w = os.pipe()
    outbox = Outbox()
    try:
        assert outbox.wait_readable(answer_r, 30) is True  # nothing watched: the caller waits
        read: list[bytes] = []

        def handler() -> bool:
            read.append(os.read(r, 100))
            if len(read) == 2:
                os.write(answer_w, b"HTTP/1.1 200 OK")  # the answer comes after two lines
            return False

        outbox.watch(r, handler)
        os.write(w, b"a")
        threading.Timer(0.05, os.write, args=(w, b"b")).start()
        assert outbox.wait_readable(answer_r, 30) is True
        assert read == [b"a", b"b"]
        os.read(answer_r, 100)
        assert outbox.wait_readable(answer_r, 0.05) is False  # no answer: timed out
    finally:
        os.close(answer_r)
        os.close(answer_w)


def test_wake_from_a_signal_handler_while_the_thread_holds_the_lock() -> None:
    """SIGTERM's handler runs on the shipper's thread, maybe inside a put: the lock is
    reentrant, and the wake still ends the next wait."""
    outbox = Outbox()
    with outbox._lock:
        outbox.wake()
    assert outbox.wait(30) is True


def test_service_reads_ahead_through_the_watched_drains_until_unwatched(
    pipe: tuple[int, int],
) -> None:
    r, _ = pipe
    outbox = Outbox()
    drained: list[int] = []

    def drain() -> None:
        drained.append(1)

    outbox.watch(r, lambda: False, drain)
    outbox.service()
    outbox.service()
    assert len(drained) == 2
    outbox.unwatch(r)
    outbox.service()
    assert len(drained) == 2


class CountingPoll:
    """The outbox's poll object, its ``poll`` calls counted."""

    def __init__(self, poll: Any) -> None:
        self._poll = poll
        self.calls = 0

    def register(self, fd: int, mask: int) -> None:
        self._poll.register(fd, mask)

    def unregister(self, fd: int) -> None:
        self._poll.unregister(fd)

    def poll(self, ms: int) -> list[tuple[int, int]]:
        self.calls += 1
        result: list[tuple[int, int]] = self._poll.poll(ms)
        return result


def test_a_put_pending_while_the_answer_is_awaited_does_not_spin_the_wait(
    pipe: tuple[int, int],
) -> None:
    """A sample (or a line) put while a batch is in flight leaves the eventfd readable until
    the next batch is drained; the wait for the answer must still block, not poll at once
    again and again (a core at 100 % until the collector answers or times out). The put is
    still there for the next ``wait``."""
    r, _ = pipe
    answer_r, answer_w = os.pipe()
    outbox = Outbox()
    try:
        outbox.watch(r, lambda: False)
        outbox.put_sample({"ts": 1.0})
        polls = CountingPoll(outbox._poll)
        outbox._poll = polls  # type: ignore[assignment]
        assert outbox.wait_readable(answer_r, 0.1) is False  # no answer: timed out
        assert polls.calls <= 3  # one wait (and what rounding leaves), not thousands
        assert outbox.wait(0) is True
    finally:
        os.close(answer_r)
        os.close(answer_w)


def test_records_read_ahead_between_slices_are_parsed_without_a_new_record(
    pipe: tuple[int, int],
) -> None:
    """``service`` (during a big batch's encoding) reads the descriptor empty into the
    read-ahead: it is not readable any more, yet its records wait to be parsed. The next
    wait runs the handler without blocking, as for a handler with work left; else they wait
    for the kernel's next record, which on a quiet host (a storm's last lines before a
    freeze) may never come."""
    r, w = pipe
    outbox = Outbox()
    ahead: list[bytes] = []

    def drain() -> None:
        with contextlib.suppress(BlockingIOError):
            ahead.append(os.read(r, 100))

    def handler() -> bool:  # as DevicePump.pump: read, then parse a run
        drain()
        if ahead:
            outbox.put_line({**line(1), "text": ahead.pop(0).decode()})
        return bool(ahead)

    outbox.watch(r, handler, drain)
    os.write(w, b"the storm's last line")
    outbox.service()
    assert ahead == [b"the storm's last line"]
    assert outbox.wait(0.05) is True
    _, lines, _ = outbox.drain(100, 1 << 20)
    assert [ln["text"] for ln in lines] == ["the storm's last line"]
    assert outbox.wait(0) is False  # nothing left: the handler is not called for ever
