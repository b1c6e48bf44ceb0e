"""Write a numbered canary line into the kernel log so the collector can measure each channel.

Each line is ``freezewatch canary <n> <wall time>``; it travels like any kernel record (kmsg
reader → HTTP, and netconsole → UDP), so the collector gets per-channel latency and loss.

Level: a record reaches netconsole only if its level is below ``console_loglevel`` (first
field of /proc/sys/kernel/printk). We pick the least severe level that still passes,
NOTICE (5) at best and never more severe than ERR (3): Ubuntu/DGX OS default ``4 4 1 7``
gives ERR. Writes without a ``<N>`` prefix get ``default_message_loglevel`` (usually WARNING,
4), which that default would not send. The facility stays LOG_USER (the kernel forces it for
/dev/kmsg writes), which keeps canaries apart from real kernel messages.

Rate: /dev/kmsg writes are limited per open file (10 per 5 s unless printk.devkmsg=on) and
excess lines are silently discarded, so the fd is kept open and we never exceed that.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

CANARY_PREFIX = "freezewatch canary"
RATE_LIMIT_BURST = 10  # kernel ratelimit_default_init: 10 records ...
RATE_LIMIT_INTERVAL_S = 5.0  # ... per 5 s per open /dev/kmsg file
LEVEL_ERR, LEVEL_NOTICE = 3, 5


def canary_text(n: int, wall: float) -> str:
    """The line the collector's parse_canary recognises."""
    return f"{CANARY_PREFIX} {n} {wall:.6f}"


def choose_level(printk_path: str = "/proc/sys/kernel/printk") -> tuple[int, bool]:
    """(level, passes_console): least severe level below console_loglevel, in ERR..NOTICE."""
    try:
        with open(printk_path) as f:
            console_loglevel = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        console_loglevel = 4  # the common distro default; gives ERR
    level = min(LEVEL_NOTICE, max(LEVEL_ERR, console_loglevel - 1))
    return level, level < console_loglevel


class Canary:
    """Call ``step()`` from the agent loop; it writes a canary when one is due."""

    def __init__(
        self,
        kmsg_path: str = "/dev/kmsg",
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        *,
        level: int | None = None,
        printk_path: str = "/proc/sys/kernel/printk",
        start_n: int = 1,
    ) -> None:
        self.kmsg_path = kmsg_path
        self.interval_s = max(interval_s, RATE_LIMIT_INTERVAL_S / RATE_LIMIT_BURST)
        self._clock = clock
        self._wall = wall
        if level is None:
            self.level, self.passes_console = choose_level(printk_path)
        else:
            self.level, self.passes_console = level, True
        self.next_n = start_n  # seed from the state dir so n keeps rising across restarts
        self.last_error: str | None = None
        self._fd: int | None = None
        self._next_due: float | None = None
        self._recent: deque[float] = deque(maxlen=RATE_LIMIT_BURST)

    def due(self) -> bool:
        return self._next_due is None or self._clock() >= self._next_due

    def step(self) -> int | None:
        """Write one canary if due and within the rate limit; returns its n, else None."""
        if not self.due():
            return None
        now = self._clock()
        if len(self._recent) == RATE_LIMIT_BURST and now - self._recent[0] < RATE_LIMIT_INTERVAL_S:
            return None  # the kernel would drop it silently; wait for the window
        self._next_due = now + self.interval_s
        n = self.next_n
        line = f"<{self.level}>{canary_text(n, self._wall())}\n".encode()
        try:
            if self._fd is None:
                # O_APPEND: harmless on /dev/kmsg, and a regular file stand-in is appended to
                flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
                self._fd = os.open(self.kmsg_path, flags)
            os.write(self._fd, line)
        except OSError as exc:
            self.last_error = f"{self.kmsg_path}: {exc.strerror or exc}"
            log.warning("canary write failed: %s", self.last_error)
            self.close()
            return None
        self.last_error = None
        self._recent.append(now)
        self.next_n += 1
        return n

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
