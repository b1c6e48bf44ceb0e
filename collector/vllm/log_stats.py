"""vLLM's periodic log lines: the engine stats line and the spec-decode metrics line."""

from __future__ import annotations

import re
from typing import Any

from collector.vllm import log_formats as fmt


def _fields(patterns: dict[str, re.Pattern[str]], msg: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, pattern in patterns.items():
        m = pattern.search(msg)
        # A pattern may spell its field more than one way: the one that matched holds it.
        value = None if m is None else next(g for g in m.groups() if g is not None)
        if value is None:
            data[name] = None
        else:
            data[name] = int(value) if name in fmt.INT_STATS else float(value)
    return data


def stats_fields(msg: str) -> dict[str, Any] | None:
    """``Engine 000: Avg prompt throughput ...`` as fields; None for any other message.

    ``engine`` is None for a line without ``Engine NNN: `` (V0, V1 before 0.8.4). V0's own
    ``Prefix cache hit rate: GPU: X%, CPU: Y%`` line is a stats fact holding only those two."""
    head = fmt.STATS.search(msg)
    if head is None:
        return None
    engine = head.group("engine") or (head.group("n") and f"{head.group('n')} aggregated")
    return {"engine": engine, **_fields(fmt.STAT_FIELDS, msg)}


def spec_fields(msg: str) -> dict[str, Any]:
    """``SpecDecoding metrics: ...`` (V0: ``Speculative metrics: ...``) as fields.

    ``acceptance_rate_pct`` is a percentage whether the line prints one or a fraction (V0 and V1
    before 0.8.4 print ``Draft acceptance rate: 0.642``); None where it is ``nan%``."""
    data = _fields(fmt.SPEC_FIELDS, msg)
    rate = fmt.ACCEPTANCE_RATE.search(msg)
    if rate is None or rate.group(1) == "nan":
        data["acceptance_rate_pct"] = None
    else:
        value = float(rate.group(1))
        data["acceptance_rate_pct"] = value if rate.group(2) else round(value * 100, 4)
    pp = fmt.PER_POSITION.search(msg)
    data["per_position_acceptance"] = (
        [float(x) for x in pp.group(1).split(", ") if x] if pp else None
    )
    return data
