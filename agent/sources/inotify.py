"""Minimal inotify via ctypes: wake a file follower the moment the file is written."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import sys
from pathlib import Path

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC


class FileWatch:
    """An inotify descriptor watching one file; ``wait`` returns on change or timeout."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls, path: Path) -> FileWatch | None:
        """None when inotify is unavailable (not Linux, no libc, limits): caller short-polls."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                return None
            mask = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
            if libc.inotify_add_watch(fd, os.fsencode(path), mask) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):
            return None
        return cls(fd)

    def wait(self, timeout: float) -> None:
        readable, _, _ = select.select([self._fd], [], [], timeout)
        if readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._fd, 4096)  # drain; the events themselves do not matter

    def close(self) -> None:
        os.close(self._fd)
