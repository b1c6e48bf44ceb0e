"""vLLM's periodic log lines: the engine stats line and the spec-decode metrics line."""

from __future__ import annotations

import re
from typing import Any

from collector.vllm import log_formats as fmt


def _fields(patterns: dict[str, re.Pattern[str]], msg: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, pattern in patterns.items():
        m = pattern.search(msg)
        if m is None:
            data[name] = None
        else:
            data[name] = int(m.group(1)) if name in fmt.INT_STATS else float(m.group(1))
    return data


def stats_fields(msg: str) -> dict[str, Any] | None:
    """``Engine 000: Avg prompt throughput ...`` as fields; None for any other message."""
    head = fmt.STATS.search(msg)
    if head is None:
        return None
    engine = head.group("engine") or f"{head.group('n')} aggregated"
    return {"engine": engine, **_fields(fmt.STAT_FIELDS, msg)}


def spec_fields(msg: str) -> dict[str, Any]:
    """``SpecDecoding metrics: ...`` as fields."""
    data = _fields(fmt.SPEC_FIELDS, msg)
    pp = fmt.PER_POSITION.search(msg)
    data["per_position_acceptance"] = (
        [float(x) for x in pp.group(1).split(", ") if x] if pp else None
    )
    return data
