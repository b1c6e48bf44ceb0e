"""A campaign across its repetitions: per profile, how often each thing happened (k of N) and
the spread of its figures; then each profile against the first one (the baseline).

N counts a profile's cold starts: repetitions that started the server and were not cut short
by a collector restart. Pure: reads ``ProfileReport``s only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.matrix.results import ProfileReport
from collector.matrix.served import CONFIG_KEYS
from collector.matrix.stats import compare_medians, compare_rates, spread

PLAN_FIELDS = (
    "model_load_gib",
    "cuda_graph_estimate_gib",
    "kv_cache_gib",
    "kv_cache_tokens",
    "max_concurrency",
)
# The plan follows from the flags; of its figures the KV cache size is the one compared.
COMPARED_PLAN = ("kv_cache_gib",)
LATENCIES = ("latency_median_s", "latency_p95_s")


def counted(reps: list[ProfileReport]) -> list[ProfileReport]:
    return [r for r in reps if r.startup.get("outcome") != "skipped" and not r.interrupted]


def event_kinds(rep: ProfileReport) -> set[str]:
    return {kind for phase in rep.kernel_events.values() for kind, n in phase.items() if n}


def headroom(rep: ProfileReport) -> float | None:
    lows = [t.get("min_mem_available_gib") for t in rep.telemetry.values()]
    found = [x for x in lows if x is not None]
    return min(found) if found else None


def _values(reps: list[ProfileReport], get: Callable[[ProfileReport], Any]) -> list[float]:
    """The numeric values of ``get`` over the repetitions (bools and missing ones left out)."""
    return [float(v) for r in reps if isinstance(v := get(r), int | float) and v is not True]


def _workload(rep: ProfileReport, name: str) -> dict[str, Any]:
    return next((w for w in rep.workloads if w.get("name") == name), {})


def _plan_field(key: str) -> Callable[[ProfileReport], Any]:
    return lambda rep: rep.startup_plan.get(key)


def _workload_field(name: str, key: str) -> Callable[[ProfileReport], Any]:
    return lambda rep: _workload(rep, name).get(key)


def served_config(reps: list[ProfileReport]) -> dict[str, list[Any]]:
    """What vLLM's log says each repetition ran with: field -> its distinct values, in order
    (one value when the repetitions agree); fields no log stated are left out."""
    out: dict[str, list[Any]] = {}
    for key in CONFIG_KEYS:
        seen = [v for r in reps if (v := r.startup_plan.get(key)) is not None]
        if seen:
            out[key] = list(dict.fromkeys(seen))
    return out


def metrics(reps: list[ProfileReport], workloads: list[str]) -> dict[str, list[float]]:
    """Per repetition values of every figure with a median: name → values."""
    out = {"startup_s": _values(reps, lambda r: r.startup.get("duration_s"))}
    for key in PLAN_FIELDS:
        out[key] = _values(reps, _plan_field(key))
    out["min_mem_available_gib"] = _values(reps, headroom)
    for name in workloads:
        for key in LATENCIES:
            out[f"{name}.{key}"] = _values(reps, _workload_field(name, key))
    return out


def profile_summary(
    name: str, reps: list[ProfileReport], kinds: list[str], workloads: list[str]
) -> dict[str, Any]:
    cold = counted(reps)
    n = len(cold)
    psi = [t.get("max_psi_full_avg10") for r in cold for t in r.telemetry.values()]
    return {
        "profile": name,
        "repetitions": len(reps),
        "n": n,
        "interrupted": sum(1 for r in reps if r.interrupted),
        "verdicts": {"fail": sum(1 for r in reps if r.verdict == "FAIL"), "n": len(reps)},
        "freezes": {
            "k": sum(1 for r in cold if r.freeze),
            "n": n,
            "incidents": [r.freeze["incident_id"] for r in cold if r.freeze],
        },
        "kernel_events": {
            kind: {"k": sum(1 for r in cold if kind in event_kinds(r)), "n": n} for kind in kinds
        },
        "drafter_loaded": {
            "k": sum(1 for r in cold if r.startup_plan.get("drafter_loaded")),
            "n": n,
        },
        "figures": {key: spread(values) for key, values in metrics(cold, workloads).items()},
        "config": served_config(cold),
        "config_mismatch": {
            key: {"k": k, "n": n}
            for key in CONFIG_KEYS
            if (k := sum(1 for r in cold if key in r.config_mismatch))
        },
        "requests": {
            name: {
                key: sum(_workload(r, name).get(key) or 0 for r in cold)
                for key in ("requests", "errors", "timeouts", "cut_by_freeze")
            }
            for name in workloads
        },
        "headroom_min_gib": min(_values(cold, headroom), default=None),
        "max_psi_full_avg10": max((x for x in psi if x is not None), default=None),
    }


def compare(
    profile: dict[str, Any],
    baseline: dict[str, Any],
    values: dict[str, list[float]],
    baseline_values: dict[str, list[float]],
) -> dict[str, Any]:
    rates = {"freezes": compare_rates(**_rate(profile["freezes"], baseline["freezes"]))}
    for kind, count in profile["kernel_events"].items():
        base = baseline["kernel_events"][kind]
        if count["k"] or base["k"]:
            rates[kind] = compare_rates(**_rate(count, base))
    medians = {}
    for key, mine in values.items():
        if key in PLAN_FIELDS and key not in COMPARED_PLAN:
            continue
        found = compare_medians(mine, baseline_values.get(key, []))
        if found is not None:
            medians[key] = found
    # The serving configuration as vLLM stated it, where both state it and it differs.
    mine_cfg, base_cfg = profile["config"], baseline["config"]
    config = {
        key: {"value": mine_cfg[key], "baseline": base_cfg[key]}
        for key in CONFIG_KEYS
        if key in mine_cfg and key in base_cfg and mine_cfg[key] != base_cfg[key]
    }
    return {
        "profile": profile["profile"],
        "baseline": baseline["profile"],
        "rates": rates,
        "medians": medians,
        "config": config,
    }


def _rate(mine: dict[str, int], base: dict[str, int]) -> dict[str, int]:
    return {"k": mine["k"], "n": mine["n"], "k0": base["k"], "n0": base["n"]}


def summarize(profiles: list[ProfileReport], order: list[str]) -> dict[str, Any]:
    """Per profile (in ``order``, the spec's) and against the first profile."""
    groups = {name: [p for p in profiles if p.profile == name] for name in order}
    groups = {name: reps for name, reps in groups.items() if reps}
    every = [r for reps in groups.values() for r in counted(reps)]
    kinds = sorted({kind for r in every for kind in event_kinds(r)})
    workloads = list(dict.fromkeys(str(w.get("name")) for r in every for w in r.workloads))
    rows = [profile_summary(name, reps, kinds, workloads) for name, reps in groups.items()]
    values = {name: metrics(counted(reps), workloads) for name, reps in groups.items()}
    comparisons = []
    if rows:
        base = rows[0]
        comparisons = [
            compare(row, base, values[row["profile"]], values[base["profile"]]) for row in rows[1:]
        ]
    return {
        "baseline": rows[0]["profile"] if rows else None,
        "kernel_kinds": kinds,
        "workloads": workloads,
        "profiles": rows,
        "comparisons": comparisons,
    }
