"""Wait for changes in a file or directory: inotify through ctypes, else a plain poll interval.

The one inotify helper of the agent (kmsg file follower, vLLM log follower). A followed log
file is watched itself (writes, truncation) and its directory only for names coming and going,
and only its own name counts: a database or another log in the same directory, written all
the time, does not wake the follower.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
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
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
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
# A followed file itself: written or truncated (both IN_MODIFY), deleted, renamed. Not
# IN_CLOSE_WRITE: a writer that opens and closes the file per line would wake us twice a line.
FILE_MASK = IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF
NAME_MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO  # in a directory, by name
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name


class ChangeWaiter(Protocol):
    def wait(self, timeout: float) -> bool: ...  # True: something changed (maybe), False: timeout

    def rewatch(self) -> None: ...  # the followed path names a new file now (reopened)

    def close(self) -> None: ...


class PollWaiter:
    """Fallback without inotify: every wait is a short sleep, then the caller re-checks."""

    def __init__(self, interval: float = 0.25) -> None:
        self._interval = interval

    def wait(self, timeout: float) -> bool:
        time.sleep(min(timeout, self._interval))
        return True

    def rewatch(self) -> None:
        pass

    def close(self) -> None:
        pass


class InotifyWaiter:
    """Blocks until inotify reports an event on the watched path (a directory watches its
    files; with ``names``, only events naming one of them count)."""

    def __init__(
        self,
        path: str,
        mask: int = FOLLOW_MASK,
        libc: ctypes.CDLL | None = None,
        *,
        names: frozenset[bytes] | None = None,
    ) -> None:
        # The process's own symbols hold libc's (no ctypes.util: it forks ldconfig, loads more)
        self._libc = libc or ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._names = names
        try:
            self._dir_wd = self.add(path, mask)
        except OSError:
            os.close(self._fd)
            raise
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)

    def add(self, path: str, mask: int) -> int:
        wd = int(self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask))
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_add_watch {path} failed: {os.strerror(err)}")
        return wd

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self._fd, wd)  # gone already (file deleted): no matter

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if not self._poll.poll(max(0, int(left * 1000))):
                return False
            if self._relevant(self._drain()):
                return True
            if left <= 0:
                return False

    def _drain(self) -> bytes:
        chunks = []
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._fd, 65536):
                chunks.append(chunk)
        return b"".join(chunks)

    def _relevant(self, data: bytes) -> bool:
        """Whether any event in ``data`` is one we wait for (all are, without ``names``)."""
        if self._names is None:
            return True
        pos = 0
        while pos + EVENT.size <= len(data):
            wd, mask, _cookie, length = EVENT.unpack_from(data, pos)
            name = data[pos + EVENT.size : pos + EVENT.size + length].rstrip(b"\0")
            pos += EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                return True  # events were lost: one of them may have been ours
            if mask & IN_IGNORED:
                continue  # a watch went away (we removed it, or its file is gone)
            if wd != self._dir_wd or name in self._names:
                return True
        return False

    def rewatch(self) -> None:
        pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FileWaiter(InotifyWaiter):
    """One file followed across rotation: a watch on the file itself (writes, truncation) and
    one on its directory for its name coming and going (created, renamed, deleted)."""

    def __init__(self, path: str, libc: ctypes.CDLL | None = None) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        super().__init__(directory, NAME_MASK, libc, names=frozenset({os.fsencode(name)}))
        self._path = path
        self._file_wd: int | None = None
        self.rewatch()

    def rewatch(self) -> None:
        """Watch the file the path names now (after a rotation: the new one)."""
        old, self._file_wd = self._file_wd, None
        with contextlib.suppress(OSError):  # not there (yet): its creation wakes us
            self._file_wd = self.add(self._path, FILE_MASK)  # the same file: the same wd
        if old is not None and old != self._file_wd:
            self.remove(old)


def make_waiter(path: str, poll_interval: float = 0.25, mask: int = FOLLOW_MASK) -> ChangeWaiter:
    """An inotify waiter on ``path`` (a file, or a directory for its files), else a poll waiter."""
    try:
        return InotifyWaiter(path, mask)
    except (OSError, AttributeError):  # no inotify (non-Linux libc), or path missing
        return PollWaiter(poll_interval)


def make_file_waiter(path: str, poll_interval: float = 0.25) -> ChangeWaiter:
    """A FileWaiter on ``path`` (which may not exist yet), else a poll waiter."""
    try:
        return FileWaiter(path)
    except (OSError, AttributeError):  # no inotify, or the directory is missing
        return PollWaiter(poll_interval)
