"""vLLM's periodic log lines: the engine stats line and the spec-decode metrics line."""

from __future__ import annotations

import re
from typing import Any

from collector.vllm import log_formats as fmt
from collector.vllm.log_formats import FLOAT

STAT_FIELDS = {
    "prompt_throughput": re.compile(rf"Avg prompt throughput: {FLOAT} tokens/s"),
    "generation_throughput": re.compile(rf"Avg generation throughput: {FLOAT} tokens/s"),
    # "reqs" may be cut after its "r" where a terminal wrapped the line (the rest is lost).
    "running": re.compile(r"Running: (\d+) r"),
    "waiting": re.compile(r"(?:Waiting|Pending): (\d+) r"),
    "swapped": re.compile(r"Swapped: (\d+) reqs"),
    "deferred": re.compile(r"Deferred: (\d+) reqs"),
    "preemptions": re.compile(r"Preemptions: (\d+)"),
    "kv_cache_usage_pct": re.compile(rf"GPU KV cache usage: {FLOAT}%"),
    "cpu_kv_cache_usage_pct": re.compile(rf"CPU KV cache usage: {FLOAT}%"),
    "prefix_cache_hit_rate_pct": re.compile(rf"Prefix cache hit rate: (?:GPU: )?{FLOAT}%"),
    "cpu_prefix_cache_hit_rate_pct": re.compile(rf"Prefix cache hit rate: GPU: .*?, CPU: {FLOAT}%"),
    "external_prefix_cache_hit_rate_pct": re.compile(rf"External prefix cache hit rate: {FLOAT}%"),
    "mm_cache_hit_rate_pct": re.compile(rf"MM cache hit rate: {FLOAT}%"),
}
SPEC_FIELDS = {
    "mean_acceptance_length": re.compile(rf"Mean acceptance length: {FLOAT}"),
    # The draft length the engine is using now (dynamic speculative decoding, 0.2x+).
    "current_speculative_depth": re.compile(r"Current speculative depth: (\d+)"),
    "accepted_throughput": re.compile(rf"Accepted throughput: {FLOAT} tokens/s"),
    "drafted_throughput": re.compile(rf"Drafted throughput: {FLOAT} tokens/s"),
    # "Number of accepted tokens: N" in V0's line and V1's before 0.8.4.
    "accepted_tokens": re.compile(r"Accepted: (\d+) tokens|Number of accepted tokens: (\d+)"),
    "drafted_tokens": re.compile(r"Drafted: (\d+) tokens|Number of draft tokens: (\d+)"),
}
# "Avg Draft acceptance rate: X%" last (0.11+), "Draft acceptance rate: X%" first (0.8.4-0.10),
# a fraction "Draft acceptance rate: 0.642" in V0's line and V1's before 0.8.4.
ACCEPTANCE_RATE = re.compile(r"Draft acceptance rate: (nan|\d+(?:\.\d+)?)(%?)")
PER_POSITION = re.compile(r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?(?:, )?)+)")
INT_STATS = {
    "running",
    "waiting",
    "swapped",
    "deferred",
    "preemptions",
    "accepted_tokens",
    "drafted_tokens",
    "current_speculative_depth",
}


def _fields(patterns: dict[str, re.Pattern[str]], msg: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, pattern in patterns.items():
        m = pattern.search(msg)
        # A pattern may spell its field more than one way: the one that matched holds it.
        value = None if m is None else next(g for g in m.groups() if g is not None)
        if value is None:
            data[name] = None
        else:
            data[name] = int(value) if name in INT_STATS else float(value)
    return data


def stats_fields(msg: str) -> dict[str, Any] | None:
    """``Engine 000: Avg prompt throughput ...`` as fields; None for any other message.

    ``engine`` is None for a line without ``Engine NNN: `` (V0, V1 before 0.8.4). V0's own
    ``Prefix cache hit rate: GPU: X%, CPU: Y%`` line is a stats fact holding only those two."""
    head = fmt.STATS.search(msg)
    if head is None:
        return None
    engine = head.group("engine") or (head.group("n") and f"{head.group('n')} aggregated")
    return {"engine": engine, **_fields(STAT_FIELDS, msg)}


def spec_fields(msg: str) -> dict[str, Any]:
    """``SpecDecoding metrics: ...`` (V0: ``Speculative metrics: ...``) as fields.

    ``acceptance_rate_pct`` is a percentage whether the line prints one or a fraction (V0 and V1
    before 0.8.4 print ``Draft acceptance rate: 0.642``); None where it is ``nan%``."""
    data = _fields(SPEC_FIELDS, msg)
    rate = ACCEPTANCE_RATE.search(msg)
    if rate is None or rate.group(1) == "nan":
        data["acceptance_rate_pct"] = None
    else:
        value = float(rate.group(1))
        data["acceptance_rate_pct"] = value if rate.group(2) else round(value * 100, 4)
    pp = PER_POSITION.search(msg)
    data["per_position_acceptance"] = (
        [float(x) for x in pp.group(1).split(", ") if x] if pp else None
    )
    return data
