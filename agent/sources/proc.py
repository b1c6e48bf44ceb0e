"""Host samples from procfs: meminfo, PSI, vmstat rates, loadavg, and the boot id."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.sources.base import PartialRead

VMSTAT_RATES = ("pgmajfault", "pswpin", "pswpout", "oom_kill", "allocstall", "compact_stall")
PSI_RESOURCES = ("memory", "cpu", "io")
UNKNOWN_BOOT_ID = "00000000-0000-0000-0000-000000000000"


def _read(path: Path) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def parse_meminfo(text: str) -> dict[str, int]:
    """All /proc/meminfo fields; ``kB`` values in bytes, unitless ones (HugePages_*) as is."""
    mem: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        mem[key.strip()] = value * 1024 if parts[1:2] == ["kB"] else value
    return mem


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

    def read(self) -> dict[str, int]:
        return parse_meminfo(_read(self.path))


class LoadSource:
    name = "load"

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.path = proc_root / "loadavg"

    def read(self) -> dict[str, float | int]:
        return parse_loadavg(_read(self.path))


class PsiSource:
    """Reads each pressure file; a missing one is reported (PartialRead) while the rest ship."""

    name = "psi"

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.dir = proc_root / "pressure"

    def read(self) -> dict[str, Any]:
        psi: dict[str, Any] = {}
        errors: list[str] = []
        for resource in PSI_RESOURCES:
            try:
                psi[resource] = parse_pressure(_read(self.dir / resource))
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
        self._clock = clock
        self._prev: tuple[float, dict[str, int]] | None = None

    def read(self) -> dict[str, float | None]:
        counters = parse_vmstat(_read(self.path))
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
