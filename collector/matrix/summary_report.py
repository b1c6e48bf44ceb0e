"""The campaign sections of a report in Markdown: what happened to the run (freezes, power
cycles, resumes), each profile across its repetitions, and each profile against the baseline."""

from __future__ import annotations

from typing import Any

DASH = "—"
LABELS = {
    "startup_s": "startup s",
    "kv_cache_gib": "KV cache GiB",
    "min_mem_available_gib": "min MemAvailable GiB",
    "latency_median_s": "p50 s",
    "latency_p95_s": "p95 s",
}


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _n(x: float) -> str:
    return f"{x:.3g}" if isinstance(x, float) else f"{x:,}"


def spread_cell(s: dict[str, Any] | None) -> str:
    """``median [min-max]`` (an en dash in the text), or the value when all repetitions agree."""
    if not s:
        return DASH
    if s["min"] == s["max"]:
        return _n(s["median"])
    return f"{_n(s['median'])} [{_n(s['min'])}–{_n(s['max'])}]"


def k_of_n(c: dict[str, int]) -> str:
    return f"{c['k']}/{c['n']}"


def label(key: str) -> str:
    name, _, figure = key.rpartition(".")
    return f"{name} {LABELS[figure]}" if name else LABELS.get(key, key)


def event_lines(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        if e.get("kind") == "freeze":
            i = e.get("incident") or {}
            went = "the run went on" if e.get("outcome") == "ok" else f"wait: {e.get('outcome')}"
            out.append(
                f"- host froze during {e.get('unit')}: incident {i.get('id')} ({i.get('kind')}),"
                f" {went}"
            )
        elif e.get("kind") == "power_cycle":
            out.append(
                f"- power cycle after {e.get('away_s')} s away (incident {e.get('incident_id')}):"
                f" `{' '.join(e.get('argv') or [])}` exit status {e.get('exit_status')}"
            )
        elif e.get("kind") == "resumed":
            steps = ", ".join(s["unit"] + " " + s["step"] for s in e.get("interrupted_steps", []))
            out.append(f"- taken over after a collector restart; interrupted: {steps or 'none'}")
    return out


def summary_lines(summary: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """The campaign sections (none for a run of single repetitions without events)."""
    rows = summary.get("profiles") or []
    lines: list[str] = []
    if events:
        lines += ["", "### Campaign", "", *event_lines(events)]
    if all(r["repetitions"] < 2 for r in rows):
        return lines
    kinds, workloads = summary.get("kernel_kinds") or [], summary.get("workloads") or []
    figures = ["startup_s", "kv_cache_gib", "min_mem_available_gib"] + [
        f"{w}.{k}" for w in workloads for k in ("latency_median_s", "latency_p95_s")
    ]
    headers = ["Profile", "Cold starts", "Freezes", *kinds, *map(label, figures), "FAIL"]
    body = [
        [
            r["profile"],
            str(r["n"]) + (f" (+{r['interrupted']} interrupted)" if r["interrupted"] else ""),
            k_of_n(r["freezes"]),
            *(k_of_n(r["kernel_events"][k]) for k in kinds),
            *(spread_cell(r["figures"].get(f)) for f in figures),
            k_of_n({"k": r["verdicts"]["fail"], "n": r["verdicts"]["n"]}),
        ]
        for r in rows
    ]
    lines += ["", "### Across repetitions", "", "k/N: cold starts with it; median [min–max].", ""]
    lines += table(headers, body)
    comparisons = summary.get("comparisons") or []
    if comparisons:
        served = [
            [c["profile"], key, f"{_values(d['value'])} vs {_values(d['baseline'])} (vLLM's log)"]
            for c in comparisons
            for key, d in (c.get("config") or {}).items()
        ]
        lines += ["", f"### Against the baseline ({summary.get('baseline')})", ""]
        lines += table(
            ["Profile", "What", "Compared"],
            [
                [c["profile"], label(key) if key in c["medians"] else key, found["words"]]
                for c in comparisons
                for key, found in [*c["rates"].items(), *c["medians"].items()]
            ]
            + served,
        )
    return lines


def config_value(v: Any) -> str:
    """A stated serving-configuration value as both reports print it (a memory share 0.85,
    a context 131,072)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _values(values: list[Any]) -> str:
    """One stated value, or each of those the repetitions disagreed on."""
    return " or ".join(map(config_value, values))
