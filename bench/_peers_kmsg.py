"""Where the peers bench's kernel lines come from: the real /dev/kmsg (root, with
``printk_devkmsg`` set to ``on`` for the run and restored after), or, where that cannot be
written and read back (a container), a regular file of kmsg records both sides follow."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

DEVICE = Path("/dev/kmsg")
PRINTK_DEVKMSG = Path("/proc/sys/kernel/printk_devkmsg")
PRIORITY = 6  # info: below this machine's console level, so nothing goes to the console
TAG = re.compile(r"fwpeers ([0-9a-f]{8}) (\d+|ready)")


def tag(nonce: str, k: int | str) -> str:
    return f"fwpeers {nonce} {k}"


def new_nonce() -> str:
    return uuid.uuid4().hex[:8]


def device_usable() -> tuple[bool, str]:
    """Whether a record written to /dev/kmsg can be read back from it here, and if not, why."""
    if os.geteuid() != 0:
        return False, "not root: /dev/kmsg cannot be written"
    try:
        reader = os.open(DEVICE, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return False, f"/dev/kmsg cannot be read: {exc}"
    try:
        os.lseek(reader, 0, os.SEEK_END)
        probe = tag(new_nonce(), "probe")
        try:
            with open(DEVICE, "wb", buffering=0) as w:
                w.write(f"<{PRIORITY}>{probe}\n".encode())
        except OSError as exc:
            return False, f"/dev/kmsg cannot be written: {exc}"
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                if probe.encode() in os.read(reader, 16384):
                    return True, ""
            except BlockingIOError:
                time.sleep(0.01)
            except BrokenPipeError:
                continue
        return False, "a record written to /dev/kmsg did not come back (another log namespace?)"
    finally:
        os.close(reader)


@contextlib.contextmanager
def devkmsg_on() -> Iterator[str]:
    """``printk_devkmsg`` = ``on`` (writes not rate-limited) for the block; the old value is
    written back on the way out. Yields the old value."""
    old = PRINTK_DEVKMSG.read_text().strip()
    if old != "on":
        PRINTK_DEVKMSG.write_text("on\n")
    try:
        yield old
    finally:
        if old != "on":
            PRINTK_DEVKMSG.write_text(old + "\n")


class Writer:
    """Writes tagged records to /dev/kmsg (one write per record, as the kernel takes them) or
    appends them, in kmsg dump format, to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.device = path == DEVICE
        self._fd = os.open(path, os.O_WRONLY | (0 if self.device else os.O_APPEND | os.O_CREAT))
        self._seq = 0
        self._usec = 10_000_000

    def record(self, text: str) -> bytes:
        if self.device:
            return f"<{PRIORITY}>{text}\n".encode()
        self._seq += 1
        self._usec += 1000
        return f"{PRIORITY},{self._seq},{self._usec},-;{text}\n".encode()

    def write(self, text: str) -> float:
        """One record; returns the perf_counter time just after the write returned."""
        os.write(self._fd, self.record(text))
        return time.perf_counter()

    def write_many(self, texts: list[str], chunk: int = 1000) -> None:
        """As fast as this side can: one write per record on the device, ``chunk`` records
        per write to a file."""
        if self.device:
            for text in texts:
                os.write(self._fd, self.record(text))
            return
        for i in range(0, len(texts), chunk):
            os.write(self._fd, b"".join(self.record(t) for t in texts[i : i + chunk]))

    def close(self) -> None:
        os.close(self._fd)
