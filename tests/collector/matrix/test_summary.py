"""A campaign across repetitions, from hand-made profile reports: k of N, medians with their
range, each profile against the baseline, and the report's campaign sections."""

from __future__ import annotations

from typing import Any

from collector.matrix.gates import evaluate_gates
from collector.matrix.report import render_json, render_markdown
from collector.matrix.results import MatrixReport, ProfileReport
from collector.matrix.spec import Gates
from collector.matrix.summary import summarize


def rep(
    profile: str,
    repetition: int,
    *,
    startup_s: float,
    p50: float,
    low_gib: float,
    nv_err: int = 0,
    freeze: int | None = None,
    **overrides: Any,
) -> ProfileReport:
    values: dict[str, Any] = {
        "profile": profile,
        "repetition": repetition,
        "startup": {"outcome": "ok", "duration_s": startup_s},
        "startup_plan": {"kv_cache_gib": 60.0, "drafter_loaded": profile == "A"},
        "kernel_events": {"startup": {"nv_err": nv_err}, "soak": {}},
        "workloads": [
            {
                "name": "soak",
                "outcome": "ok",
                "requests": 10,
                "errors": 0,
                "cut_by_freeze": 0,
                "latency_median_s": p50,
                "latency_p95_s": 2 * p50,
            },
        ],
        "telemetry": {"soak": {"min_mem_available_gib": low_gib, "max_psi_full_avg10": 1.0}},
    }
    if freeze is not None:
        values["freeze"] = {
            "incident_id": freeze,
            "kind": "unreachable",
            "resolution": "rebooted",
            "during": "workload soak",
        }
    report = ProfileReport(**{**values, **overrides})
    report.verdict, report.reasons = evaluate_gates(Gates(), report)
    return report


def campaign() -> list[ProfileReport]:
    """A: 3 cold starts, NV_ERR in 2, host froze once; B: 3 clean ones and 1 interrupted."""
    return [
        rep("A", 1, startup_s=400, p50=1.0, low_gib=5.0, nv_err=1),
        rep("B", 1, startup_s=300, p50=2.0, low_gib=20.0),
        rep("A", 2, startup_s=420, p50=1.2, low_gib=4.0, nv_err=3, freeze=17),
        rep("B", 2, startup_s=310, p50=2.1, low_gib=21.0),
        rep("A", 3, startup_s=410, p50=1.1, low_gib=6.0),
        rep("B", 3, startup_s=320, p50=2.2, low_gib=22.0),
        rep("B", 4, startup_s=999, p50=9.9, low_gib=0.1, interrupted=True),
    ]


def test_each_profile_across_its_repetitions() -> None:
    summary = summarize(campaign(), ["A", "B"])
    a, b = summary["profiles"]
    assert summary["baseline"] == "A" and summary["kernel_kinds"] == ["nv_err"]
    assert (a["n"], a["repetitions"], b["n"], b["repetitions"], b["interrupted"]) == (
        3,
        3,
        3,
        4,
        1,
    )
    assert a["freezes"] == {"k": 1, "n": 3, "incidents": [17]}
    assert a["kernel_events"] == {"nv_err": {"k": 2, "n": 3}}
    assert b["kernel_events"] == {"nv_err": {"k": 0, "n": 3}}
    assert a["drafter_loaded"] == {"k": 3, "n": 3}
    assert a["figures"]["startup_s"] == {"median": 410.0, "min": 400.0, "max": 420.0, "n": 3}
    assert a["figures"]["soak.latency_median_s"] == {"median": 1.1, "min": 1.0, "max": 1.2, "n": 3}
    assert a["figures"]["soak.latency_p95_s"]["median"] == 2.2
    assert a["headroom_min_gib"] == 4.0 and b["headroom_min_gib"] == 20.0  # interrupted left out
    assert a["requests"]["soak"] == {"requests": 30, "errors": 0, "timeouts": 0, "cut_by_freeze": 0}
    assert a["verdicts"] == {"fail": 2, "n": 3}  # NV_ERR twice (one of them also froze)


def test_against_the_baseline_in_words() -> None:
    (b,) = summarize(campaign(), ["A", "B"])["comparisons"]
    assert (b["profile"], b["baseline"]) == ("B", "A")
    assert b["rates"]["nv_err"]["words"] == (
        "0 of 3 vs 2 of 3: p = 0.4, not distinguishable "
        "(with 3 vs 3 repetitions even 3 of 3 vs 0 of 3 would give p = 0.1)"
    )
    assert b["rates"]["freezes"]["p_value"] == 1.0
    startup = b["medians"]["startup_s"]
    assert (startup["median"], startup["baseline_median"], startup["difference"]) == (
        310,
        410,
        -100,
    )
    assert startup["words"].endswith(": lower")
    assert b["medians"]["soak.latency_median_s"]["words"].endswith(": higher")
    assert set(b["medians"]) == {
        "startup_s",
        "kv_cache_gib",
        "min_mem_available_gib",
        "soak.latency_median_s",
        "soak.latency_p95_s",
    }
    assert b["medians"]["kv_cache_gib"]["words"].endswith("not distinguishable")


def test_the_report_leads_with_the_failure_and_ends_with_the_campaign() -> None:
    profiles = campaign()
    report = MatrixReport(
        name="iso",
        host="spark-01",
        run_id=4,
        status="failed",
        error="host spark-01 did not come back within 1800 s after it froze (incident 17)",
        profiles=profiles,
        summary=summarize(profiles, ["A", "B"]),
        events=[
            {
                "kind": "freeze",
                "unit": "A #2",
                "incident": {"id": 17, "kind": "unreachable"},
                "outcome": "ok",
            }
        ],
    )
    md = render_markdown(report).splitlines()
    assert md[:3] == [
        "## Matrix iso on spark-01 (run 4)",
        "",
        "**Failed:** host spark-01 did not come back within 1800 s after it froze (incident 17)",
    ]
    text = "\n".join(md)
    assert "- host froze during A #2: incident 17 (unreachable), the run went on" in text
    assert "| A | 3 | 1/3 | 2/3 | 410 [400–420] | 60 | 5 [4–6] | 1.1 [1–1.2] |" in text
    assert "| B | 3 (+1 interrupted) | 0/3 | 0/3 |" in text
    assert "| B | nv_err | 0 of 3 vs 2 of 3: p = 0.4, not distinguishable" in text
    data = render_json(report)
    assert data["error"] == report.error and data["summary"]["baseline"] == "A"
    assert (
        MatrixReport.from_dict(
            {
                **data,
                "profiles": [
                    {k: v for k, v in p.items() if k != "label"} for p in data["profiles"]
                ],
            }
        ).summary
        == data["summary"]
    )


def test_single_repetitions_get_no_campaign_sections() -> None:
    profiles = [
        rep("A", 1, startup_s=1, p50=1, low_gib=1),
        rep("B", 1, startup_s=1, p50=1, low_gib=1),
    ]
    md = render_markdown(
        MatrixReport(name="m", host="h", profiles=profiles, summary=summarize(profiles, ["A", "B"]))
    )
    assert "Across repetitions" not in md and "Failed" not in md
