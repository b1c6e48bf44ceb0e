"""Wait for changes in a file or directory: inotify through ctypes, else a plain poll interval.

The one inotify helper of the agent (kmsg file follower, vLLM log follower)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import time
from typing import Protocol

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# Everything that can mean "the followed file grew, moved, was replaced or truncated".
FOLLOW_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)


class ChangeWaiter(Protocol):
    def wait(self, timeout: float) -> bool: ...  # True: something changed (maybe), False: timeout

    def close(self) -> None: ...


class PollWaiter:
    """Fallback without inotify: every wait is a short sleep, then the caller re-checks."""

    def __init__(self, interval: float = 0.25) -> None:
        self._interval = interval

    def wait(self, timeout: float) -> bool:
        time.sleep(min(timeout, self._interval))
        return True

    def close(self) -> None:
        pass


class InotifyWaiter:
    """Blocks until inotify reports an event on the watched path (a directory watches its files)."""

    def __init__(self, path: str, mask: int = FOLLOW_MASK, libc: ctypes.CDLL | None = None) -> None:
        # The process's own symbols hold libc's (no ctypes.util: it forks ldconfig, loads more)
        libc = libc or ctypes.CDLL(None, use_errno=True)
        self._fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if libc.inotify_add_watch(self._fd, os.fsencode(path), mask) < 0:
            err = ctypes.get_errno()
            os.close(self._fd)
            raise OSError(err, f"inotify_add_watch {path} failed")
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)

    def wait(self, timeout: float) -> bool:
        if not self._poll.poll(max(0, int(timeout * 1000))):
            return False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, 65536):  # drain: we only care that something happened
                pass
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def make_waiter(path: str, poll_interval: float = 0.25) -> ChangeWaiter:
    """An inotify waiter on ``path`` (a file, or a directory for its files), else a poll waiter."""
    try:
        return InotifyWaiter(path)
    except (OSError, AttributeError):  # no inotify (non-Linux libc), or path missing
        return PollWaiter(poll_interval)
