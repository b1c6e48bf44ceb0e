"""Host samples from procfs: meminfo, PSI, vmstat rates, loadavg, and the boot id.

Each file is kept open and read again from offset 0 every tick (as node_exporter does): a
procfs file regenerates its text on every read from the start, and one ``pread`` costs a
quarter of an open-read-close through Python's text layer.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.sources.base import PartialRead

VMSTAT_RATES = ("pgmajfault", "pswpin", "pswpout", "oom_kill", "allocstall", "compact_stall")
PSI_RESOURCES = ("memory", "cpu", "io")
UNKNOWN_BOOT_ID = "00000000-0000-0000-0000-000000000000"
READ_SIZE = 65536  # larger than any of these files; a full buffer is read on

_MEMINFO = re.compile(r"^([^:\n]+):[ \t]*(-?\d+)(?:[ \t]+(kB)(?!\S))?", re.MULTILINE)
_RATE_KEYS = ("pgmajfault", "pswpin", "pswpout", "oom_kill", "compact_stall", "allocstall")


def _read(path: Path) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


class ProcFile:
    """One procfs file held open and re-read whole from offset 0 on every ``read``.

    If the file at ``path`` was replaced (a test's fixture tree rewritten by rename: the open
    one then has no links left), it is opened anew; an error leaves it closed, to be opened
    again next time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def read(self) -> str:
        if self._fd >= 0 and os.fstat(self._fd).st_nlink == 0:
            self.close()
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.pread(self._fd, READ_SIZE, 0)
            while len(data) % READ_SIZE == 0 and data:  # more than one buffer: read on
                more = os.pread(self._fd, READ_SIZE, len(data))
                if not more:
                    break
                data += more
        except OSError:
            self.close()
            raise
        return data.decode("ascii", "replace")

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a source dropped without close() leaks no descriptor
        self.close()


def parse_meminfo(text: str) -> dict[str, int]:
    """All /proc/meminfo fields; ``kB`` values in bytes, unitless ones (HugePages_*) as is."""
    return {
        key.strip(): int(value) * 1024 if kb else int(value)
        for key, value, kb in _MEMINFO.findall(text)
    }


def parse_pressure(text: str) -> dict[str, dict[str, float]]:
    """``some``/``full`` lines of a /proc/pressure file → {avg10, avg60, avg300, total}."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        values: dict[str, float] = {}
        for pair in pairs:
            key, _, value = pair.partition("=")
            values[key] = int(value) if key == "total" else float(value)
        if kind in ("some", "full"):
            out[kind] = values
    return out


def parse_vmstat(text: str) -> dict[str, int]:
    """/proc/vmstat counters; ``allocstall_*`` zones are summed into ``allocstall``."""
    counters: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            n = int(value)
        except ValueError:
            continue
        counters[key] = n
        if key.startswith("allocstall_"):
            counters["allocstall"] = counters.get("allocstall", 0) + n
    return counters


def rate_counters(text: str) -> dict[str, int]:
    """``parse_vmstat`` of only the counters behind ``VMSTAT_RATES``: a few ``find``s in C
    instead of a Python loop over the ~180 lines."""
    text = "\n" + text
    counters: dict[str, int] = {}
    for key in _RATE_KEYS:
        value = _counter(text, text.find(f"\n{key} "))
        if value is not None:
            counters[key] = value
    at = text.find("\nallocstall_")
    while at >= 0:  # one counter per memory zone, summed
        key = text[at + 1 : text.find(" ", at)]
        value = _counter(text, at)
        if value is not None:
            counters[key] = value
            counters["allocstall"] = counters.get("allocstall", 0) + value
        at = text.find("\nallocstall_", at + 1)
    return counters


def _counter(text: str, at: int) -> int | None:
    """The number on the line starting after ``text[at]`` (a newline), None if none."""
    if at < 0:
        return None
    end = text.find("\n", at + 1)
    _, _, value = text[at + 1 : end if end >= 0 else len(text)].partition(" ")
    try:
        return int(value)
    except ValueError:
        return None


def parse_loadavg(text: str) -> dict[str, float | int]:
    one, five, fifteen, tasks, *_ = text.split()
    running, _, total = tasks.partition("/")
    return {
        "1": float(one),
        "5": float(five),
        "15": float(fifteen),
        "running": int(running),
        "total": int(total),
    }


def read_boot_id(proc_root: Path) -> str:
    return _read(proc_root / "sys/kernel/random/boot_id").strip()


class MemSource:
    name = "mem"

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.path = proc_root / "meminfo"
        self._file = ProcFile(self.path)

    def read(self) -> dict[str, int]:
        return parse_meminfo(self._file.read())


class LoadSource:
    name = "load"

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.path = proc_root / "loadavg"
        self._file = ProcFile(self.path)

    def read(self) -> dict[str, float | int]:
        return parse_loadavg(self._file.read())


class PsiSource:
    """Reads each pressure file; a missing one is reported (PartialRead) while the rest ship."""

    name = "psi"

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.dir = proc_root / "pressure"
        self._files = {resource: ProcFile(self.dir / resource) for resource in PSI_RESOURCES}

    def read(self) -> dict[str, Any]:
        psi: dict[str, Any] = {}
        errors: list[str] = []
        for resource, file in self._files.items():
            try:
                psi[resource] = parse_pressure(file.read())
            except OSError as exc:
                errors.append(f"{self.dir / resource}: {exc.strerror or exc}")
        if errors and not psi:
            raise OSError("; ".join(errors))
        if errors:
            raise PartialRead(psi, "; ".join(errors))
        return psi


class VmstatSource:
    """Per-second rates since the previous read; the first read has no rate (all null)."""

    name = "vmstat"

    def __init__(
        self, proc_root: Path = Path("/proc"), *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = proc_root / "vmstat"
        self._file = ProcFile(self.path)
        self._clock = clock
        self._prev: tuple[float, dict[str, int]] | None = None

    def read(self) -> dict[str, float | None]:
        counters = rate_counters(self._file.read())
        now = self._clock()
        prev, self._prev = self._prev, (now, counters)
        rates: dict[str, float | None] = dict.fromkeys(VMSTAT_RATES)
        if prev is None or now <= prev[0]:
            return rates
        elapsed = now - prev[0]
        for key in VMSTAT_RATES:
            if key in counters and key in prev[1]:
                # a counter never decreases within a boot; max() guards odd kernels
                rates[key] = round(max(0, counters[key] - prev[1][key]) / elapsed, 3)
        return rates


def proc_sources(proc_root: Path) -> list[Any]:
    return [
        MemSource(proc_root),
        PsiSource(proc_root),
        VmstatSource(proc_root),
        LoadSource(proc_root),
    ]
