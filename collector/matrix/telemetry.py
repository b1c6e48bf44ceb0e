"""Host telemetry inside one window, from the agent's samples (wire-format dicts or rows)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

GIB = 1024**3


def _epoch(value: float | datetime) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _as_mapping(sample: Any) -> Mapping[str, Any]:
    """A sample as a wire-format mapping: dicts pass through; rows expose `data` or attributes."""
    if isinstance(sample, Mapping):
        return sample
    data = getattr(sample, "data", None)
    if isinstance(data, Mapping):
        return {**data, "ts": getattr(sample, "ts", data.get("ts"))}
    return {key: getattr(sample, key, None) for key in ("ts", "mem", "psi")}


def _max(values: list[float]) -> float | None:
    return max(values) if values else None


def windowed_telemetry(
    samples: Iterable[Any], start: float | datetime, end: float | datetime
) -> dict[str, Any]:
    """min MemAvailable, max used (MemTotal - MemAvailable), max swap used and max memory PSI
    full avg10 over the samples with start <= ts <= end; figures None when no sample says."""
    lo, hi = _epoch(start), _epoch(end)
    available: list[float] = []
    used: list[float] = []
    swap: list[float] = []
    psi: list[float] = []
    count = 0
    for raw in samples:
        sample = _as_mapping(raw)
        ts = sample.get("ts")
        if ts is None or not lo <= _epoch(ts) <= hi:
            continue
        count += 1
        mem = sample.get("mem") or {}
        if mem.get("MemAvailable") is not None:
            available.append(mem["MemAvailable"] / GIB)
            if mem.get("MemTotal") is not None:
                used.append((mem["MemTotal"] - mem["MemAvailable"]) / GIB)
        if mem.get("SwapTotal") is not None and mem.get("SwapFree") is not None:
            swap.append((mem["SwapTotal"] - mem["SwapFree"]) / GIB)
        full = ((sample.get("psi") or {}).get("memory") or {}).get("full") or {}
        if full.get("avg10") is not None:
            psi.append(float(full["avg10"]))
    return {
        "start": lo,
        "end": hi,
        "samples": count,
        "min_mem_available_gib": min(available) if available else None,
        "max_used_gib": _max(used),
        "max_swap_gib": _max(swap),
        "max_psi_full_avg10": _max(psi),
    }
