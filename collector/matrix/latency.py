"""Per-profile request latency distributions from a run's `requests.jsonl` (the UI's plot)."""

from __future__ import annotations

import json
from pathlib import Path

from collector.matrix.results import percentile
from collector.schemas import OutModel

# Points sent per profile; above this the sorted latencies are thinned evenly (quantiles stay).
MAX_POINTS = 2000
QUANTILES = {"p25": 0.25, "median": 0.5, "p75": 0.75, "p95": 0.95}


def _thin(values: list[float], limit: int) -> list[float]:
    if len(values) <= limit:
        return values
    step = (len(values) - 1) / (limit - 1)
    return [values[round(i * step)] for i in range(limit)]


def _label(profile: str, repetition: int) -> str:
    return profile if repetition == 1 else f"{profile} #{repetition}"


class ProfileLatency(OutModel):
    """One profile x repetition's request latencies (s): nearest-rank quantiles over every
    request that ended, and the sorted (thinned) latencies of the ok and the failed ones."""

    profile: str
    repetition: int
    label: str
    requests: int
    failed: int
    min: float
    max: float
    p25: float | None
    median: float | None
    p75: float | None
    p95: float | None
    ok_s: list[float]
    failed_s: list[float]


def profile_latencies(
    path: Path | None, *, run_id: int, limit: int = MAX_POINTS
) -> list[ProfileLatency]:
    """Per profile x repetition in run order: quantiles and the (sorted, thinned) latencies in
    seconds of the run's requests that ended, split into ``ok`` and ``failed`` (errors and
    timeouts); cancelled requests and unreadable lines are left out."""
    if path is None or not path.is_file():
        return []
    groups: dict[tuple[str, int], dict[str, list[float]]] = {}
    with path.open(encoding="utf-8") as records:
        for line in records:
            try:
                record = json.loads(line)
                latency = float(record["latency_s"])
            except (ValueError, KeyError, TypeError):
                continue
            if record.get("run_id") != run_id or record.get("cancelled"):
                continue
            key = (str(record.get("profile")), int(record.get("repetition") or 1))
            group = groups.setdefault(key, {"ok": [], "failed": []})
            group["failed" if record.get("error") else "ok"].append(latency)
    out = []
    for (profile, repetition), group in groups.items():
        every = sorted(group["ok"] + group["failed"])
        out.append(
            ProfileLatency.model_validate(
                {
                    "profile": profile,
                    "repetition": repetition,
                    "label": _label(profile, repetition),
                    "requests": len(every),
                    "failed": len(group["failed"]),
                    "min": every[0],
                    "max": every[-1],
                    **{name: percentile(every, q) for name, q in QUANTILES.items()},
                    "ok_s": _thin(sorted(group["ok"]), limit),
                    "failed_s": _thin(sorted(group["failed"]), limit),
                }
            )
        )
    return out
