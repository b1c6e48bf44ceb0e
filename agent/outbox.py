"""The in-memory queue between sources and the shipper; waking it is how lines skip the timer.

The shipper's thread waits here, in one ``poll``, for a put from another thread (an eventfd),
for a watched file descriptor (``watch``: /dev/kmsg, read on this very thread) and, while a
batch is in flight, for the collector's answer (``wait_readable``). A kernel line then costs
one wake-up (its answer is read when the next batch goes, ``agent.shipper``), where a reader
thread handing it to the shipper's thread cost more than as many again, in the handoff and in
the threads' turns at the interpreter's lock.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP
WRITABLE = select.POLLOUT | select.POLLERR | select.POLLHUP
# A watched descriptor's handler: reads what is there; True if it left work for a next call
# (a storm's records read ahead and not yet parsed), so the wait does not block meanwhile.
Handler = Callable[[], bool]


class Outbox:
    """Thread-safe queues of unsequenced samples, lines and events; ``wait`` wakes on any put.
    One thread waits (the shipper's): the last to call ``wait`` is the one its puts skip the
    eventfd for."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # reentrant: a signal handler may call wake()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll = select.poll()
        self._poll.register(self._wake_fd, select.POLLIN)
        self._watched: dict[int, Handler] = {}
        self._drains: dict[int, Callable[[], None]] = {}
        self._busy: set[int] = set()  # watched descriptors whose handler left work
        self._samples: deque[dict[str, Any]] = deque()
        self._lines: deque[dict[str, Any]] = deque()
        self._events: deque[dict[str, Any]] = deque()
        self._line_bytes = 0  # the rough JSON size of the queued lines (see ``size``)
        self._woken = False  # something was put (or ``wake``) since the last wait returned
        self._written = False  # the eventfd is readable exactly while this is set
        # The thread that waits here (the shipper's): its own puts (a /dev/kmsg handler's
        # lines, the shipper's events) need no eventfd, its next ``wait`` reads ``_woken``.
        self._waiter: int | None = None

    def put_sample(self, sample: dict[str, Any]) -> None:
        self._put(self._samples, sample)

    def put_line(self, line: dict[str, Any]) -> None:
        with self._lock:
            self._lines.append(line)
            self._line_bytes += size(line)
            if not self._woken:
                self._signal()

    def put_event(self, event: dict[str, Any]) -> None:
        """``event`` is ``{"ts", "kind", "data"}`` without seq."""
        self._put(self._events, event)

    def _put(self, queue: deque[dict[str, Any]], record: dict[str, Any]) -> None:
        with self._lock:
            queue.append(record)
            if not self._woken:  # else the shipper was told already and has yet to drain
                self._signal()

    def wake(self) -> None:
        """Wake the waiting thread, also from a signal handler on that very thread (its poll
        is resumed after the handler: only the eventfd ends it)."""
        with self._lock:
            self._woken = True
            if not self._written:
                self._write()

    def _signal(self) -> None:
        self._woken = True
        if not self._written and threading.get_ident() != self._waiter:
            self._write()

    def _write(self) -> None:
        self._written = True
        os.eventfd_write(self._wake_fd, 1)

    def _unsignal(self) -> None:
        self._woken = False
        if self._written:
            self._written = False
            with contextlib.suppress(BlockingIOError):  # already read
                os.eventfd_read(self._wake_fd)

    def watch(self, fd: int, handler: Handler, drain: Callable[[], None] | None = None) -> None:
        """Call ``handler`` (on the waiting thread) whenever ``fd`` is readable; ``drain``,
        if given, reads ahead without parsing (``service``)."""
        self._watched[fd] = handler
        self._poll.register(fd, READABLE)
        if drain is not None:
            self._drains[fd] = drain

    def unwatch(self, fd: int) -> None:
        if self._watched.pop(fd, None) is not None:
            self._poll.unregister(fd)
        self._busy.discard(fd)
        self._drains.pop(fd, None)

    def service(self) -> None:
        """Read ahead what the watched descriptors hold, parsing nothing: the waiting thread
        calls this between slices of long work (encoding a burst's batch), so a storm is
        not overwritten in the kernel meanwhile. What it read is parsed by the handler,
        called by the next wait without blocking (the descriptor, read empty, is not
        readable any more)."""
        for fd, drain in self._drains.items():
            drain()
            self._busy.add(fd)

    def wait(self, timeout: float) -> bool:
        """Block until something is put (or ``wake``) or ``timeout``, running the handlers of
        watched descriptors that become readable meanwhile; True if woken."""
        self._waiter = threading.get_ident()
        if not self._woken:
            self._poll_once(timeout)
        with self._lock:
            woken = self._woken
            if woken:
                self._unsignal()
            return woken

    def wait_readable(self, fd: int, timeout: float) -> bool:
        """Block until ``fd`` (the collector's socket) is readable or ``timeout``, running the
        watched descriptors' handlers meanwhile; True if readable. With nothing watched it
        returns at once: the socket's own timeout does the waiting."""
        return not self._watched or self._wait_for(fd, READABLE, timeout)

    def wait_writable(self, fd: int, timeout: float) -> bool:
        """Block until ``fd`` (a socket connecting to the collector) is writable (connected,
        or failed: its ``SO_ERROR`` says) or ``timeout``, running the watched descriptors'
        handlers meanwhile; True if writable."""
        return self._wait_for(fd, WRITABLE, timeout)

    def _wait_for(self, fd: int, events: int, timeout: float) -> bool:
        self._poll.register(fd, events)
        # A put meanwhile is for the next ``wait``: its eventfd, readable until the next batch
        # is drained, would end every poll here at once (a spin until the answer comes).
        self._poll.unregister(self._wake_fd)
        try:
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                if fd in self._poll_once(left):
                    return True
            return False
        finally:
            self._poll.unregister(fd)
            self._poll.register(self._wake_fd, select.POLLIN)

    def _poll_once(self, timeout: float) -> set[int]:
        """One wait (none while a handler has work left); runs the handlers; the ready fds."""
        ms = 0 if self._busy else max(0, round(timeout * 1000))
        ready = {fd for fd, _ in self._poll.poll(ms)}
        for fd in ready | self._busy:
            handler = self._watched.get(fd)
            if handler is not None:
                if handler():
                    self._busy.add(fd)
                else:
                    self._busy.discard(fd)
        return ready

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples) + len(self._lines) + len(self._events)

    def drain(
        self, max_records: int, max_bytes: int, *, lines: bool = True
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(samples, lines, events) in arrival order per stream, within the batch limits."""
        samples: list[dict[str, Any]] = []
        taken: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        budget_records, budget_bytes = max_records, max_bytes
        with self._lock:
            pairs = [(self._events, events), (self._samples, samples)]
            if lines:
                pairs.append((self._lines, taken))
            for queue, dest in pairs:
                fits = len(queue) <= budget_records and self._line_bytes <= budget_bytes
                if queue is self._lines and fits:  # a burst's common case: all of it
                    dest.extend(queue)
                    queue.clear()
                    budget_records -= len(dest)
                    budget_bytes -= self._line_bytes
                    self._line_bytes = 0
                    continue
                take, append = queue.popleft, dest.append
                while queue and budget_records > 0:
                    cost = size(queue[0])
                    if cost > budget_bytes and dest:
                        break
                    append(take())
                    budget_records -= 1
                    budget_bytes -= cost
                    if queue is self._lines:
                        self._line_bytes -= cost
            # more left: the next wait returns at once; else only a new put wakes it
            more = bool(self._samples or self._lines or self._events)
            if more and not self._woken:
                self._signal()
            elif self._woken and not more:
                self._unsignal()
        return samples, taken, events


def size(record: dict[str, Any]) -> int:
    """A record's rough JSON size, what batches are cut by."""
    return len(record.get("text", "")) + 512
