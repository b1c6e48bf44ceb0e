from datetime import datetime, timezone

from collector.matrix.gates import evaluate_gates
from collector.matrix.report import render_json, render_markdown, windowed_telemetry
from collector.matrix.results import MatrixReport, ProfileReport
from collector.matrix.spec import Gates

GIB = 1024**3


def _workload(**overrides):
    figures = {
        "name": "tool_conversation",
        "kind": "tool_conversation",
        "outcome": "ok",
        "requests": 40,
        "errors": 0,
        "timeouts": 0,
        "latency_median_s": 2.5,
        "latency_p95_s": 9.75,
        "latency_max_s": 31.2,
        "over_30s": 1,
        "max_prompt_tokens": 65900,
        "malformed_tool_calls": 2,
    }
    return {**figures, **overrides}


def _profile(name, **overrides):
    values = {
        "profile": name,
        "startup": {"outcome": "ok", "duration_s": 412.0},
        "startup_plan": {
            "model_load_gib": 21.5,
            "drafter_loaded": False,
            "cuda_graph_estimate_gib": 0.9,
            "kv_cache_gib": 52.66,
            "kv_cache_tokens": 1253392,
            "max_concurrency": 4.78,
        },
        "kernel_events": {"startup": {}, "tool_conversation": {}},
        "workloads": [_workload()],
        "telemetry": {
            "tool_conversation": {
                "samples": 300,
                "min_mem_available_gib": 18.25,
                "max_used_gib": 101.5,
                "max_swap_gib": 0.0,
                "max_psi_full_avg10": 1.5,
            }
        },
    }
    return ProfileReport(**{**values, **overrides})


def test_clean_profile_passes():
    assert evaluate_gates(
        Gates(min_mem_available_gib=8, max_p95_latency_s=30, max_errors=0), _profile("D")
    ) == ("PASS", [])


def test_kernel_events_and_thresholds_fail_with_reasons():
    profile = _profile(
        "A",
        kernel_events={
            "startup": {"nv_err": 10, "soft_lockup": 1},
            "tool_conversation": {"xid": 1},
        },
        workloads=[_workload(errors=3, latency_p95_s=45.5)],
        telemetry={"tool_conversation": {"min_mem_available_gib": 3.2}},
    )
    gates = Gates(
        min_mem_available_gib=8, max_p95_latency_s=30, max_errors=2, max_malformed_tool_calls=1
    )
    verdict, reasons = evaluate_gates(gates, profile)
    assert verdict == "FAIL"
    assert reasons == [
        "kernel events during startup: nv_err x10",
        "kernel events during workload tool_conversation: xid x1",
        "workload tool_conversation: p95 latency 45.50 s > 30 s",
        "3 request errors > max_errors 2",
        "2 malformed tool calls > max_malformed_tool_calls 1",
        "workload tool_conversation: MemAvailable fell to 3.20 GiB < 8 GiB",
    ]
    # soft_lockup is not in this gate's list; an empty list fails on no kernel event.
    assert evaluate_gates(Gates(fail_on_kernel=[]), profile) == ("PASS", [])


def test_failed_startup_and_missing_samples_fail():
    profile = _profile(
        "B", startup={"outcome": "timeout", "error": "no /health in 1800 s"}, telemetry={}
    )
    verdict, reasons = evaluate_gates(Gates(min_mem_available_gib=1), profile)
    assert verdict == "FAIL"
    assert reasons == [
        "startup timeout: no /health in 1800 s",
        "workload tool_conversation: no MemAvailable samples in its window",
    ]
    failed = _profile(
        "C", workloads=[{"name": "agent", "kind": "command", "outcome": "failed", "exit_status": 2}]
    )
    assert evaluate_gates(Gates(), failed)[1] == ["workload agent failed (exit status 2)"]


def _report():
    a = _profile(
        "A",
        description="base",
        verdict="FAIL",
        reasons=["kernel events during startup: nv_err x10"],
        kernel_events={"startup": {"nv_err": 10}, "tool_conversation": {}},
        kernel_advice={"startup": {"severity": "error", "action": "restart_app"}},
        startup_plan={
            "model_load_gib": 22.1,
            "drafter_loaded": True,
            "cuda_graph_estimate_gib": -4.74,
            "kv_cache_gib": 48.0,
            "kv_cache_tokens": 1048576,
            "max_concurrency": 4.0,
        },
    )
    c = _profile(
        "C",
        description="remove --speculative-config",
        verdict="PASS",
        workloads=[_workload(latency_p95_s=7.5, max_prompt_tokens=66001)],
    )
    return MatrixReport(
        name="nemoclaw-spark-qwen", host="spark-01", run_id=12, status="succeeded", profiles=[a, c]
    )


def _row(markdown, section, label):
    part = markdown.split(f"### {section}")[1].split("###")[0]
    rows = [line for line in part.splitlines() if line.startswith(f"| {label} |")]
    assert len(rows) == 1, rows
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_markdown_tables_put_values_in_the_right_rows():
    md = render_markdown(_report())
    assert md.startswith("## Matrix nemoclaw-spark-qwen on spark-01 (run 12)")
    assert (
        "| Profile | Changes | Startup | Startup s | Model load GiB | Drafter | "
        "CUDA graph est. GiB | KV cache GiB | KV cache tokens | Max concurrency | "
        "Kernel events (startup) |"
    ) in md
    assert _row(md, "Startup memory plan", "A") == [
        "A",
        "base",
        "ok",
        "412",
        "22.10",
        "yes",
        "-4.74",
        "48.00",
        "1,048,576",
        "4.00",
        "nv_err x10 (error: restart_app)",
    ]
    assert _row(md, "Startup memory plan", "C")[5] == "no"
    assert _row(md, "Startup memory plan", "C")[10] == "none"
    assert "| Profile | Workload | Outcome | Requests | Errors | Timeouts | p50 s | p95 s |" in md
    assert _row(md, "Workloads", "C") == [
        "C",
        "tool_conversation",
        "ok",
        "40",
        "0",
        "0",
        "2.50",
        "7.50",
        "31.20",
        "1",
        "66,001",
        "2",
        "none",
    ]
    assert _row(md, "Workloads", "A")[7] == "9.75"
    assert _row(md, "Host telemetry inside each workload window", "A") == [
        "A",
        "tool_conversation",
        "300",
        "18.25",
        "101.50",
        "0.00",
        "1.50",
    ]
    assert _row(md, "Verdicts", "A") == [
        "A",
        "FAIL",
        "kernel events during startup: nv_err x10",
        "—",
    ]
    assert _row(md, "Verdicts", "C") == ["C", "PASS", "—", "—"]


def test_json_round_trips_and_labels_repetitions():
    report = _report()
    report.profiles.append(_profile("A", repetition=2))
    data = render_json(report)
    assert [p["label"] for p in data["profiles"]] == ["A", "C", "A #2"]
    assert MatrixReport.from_dict(report.to_dict()) == report
    assert "| A #2 |" in render_markdown(report)


def _sample(ts, avail_gib, total_gib=119.0, swap_used_gib=0.0, psi=0.0):
    return {
        "seq": int(ts),
        "ts": ts,
        "mem": {
            "MemTotal": total_gib * GIB,
            "MemAvailable": avail_gib * GIB,
            "SwapTotal": 16 * GIB,
            "SwapFree": (16 - swap_used_gib) * GIB,
        },
        "psi": {"memory": {"full": {"avg10": psi}, "some": {"avg10": psi * 2}}},
    }


def test_windowed_telemetry_only_uses_samples_inside_the_window():
    samples = [
        _sample(99.9, 1.0, swap_used_gib=9, psi=80),  # before: would dominate every figure
        _sample(100.0, 30.0, psi=0.5),
        _sample(150.0, 12.0, swap_used_gib=2.5, psi=7.25),
        _sample(200.0, 20.0),
        _sample(200.1, 0.5, swap_used_gib=15, psi=99),  # after
    ]
    t = windowed_telemetry(samples, 100.0, 200.0)
    assert t["samples"] == 3
    assert t["min_mem_available_gib"] == 12.0
    assert t["max_used_gib"] == 107.0
    assert t["max_swap_gib"] == 2.5
    assert t["max_psi_full_avg10"] == 7.25
    empty = windowed_telemetry(samples, 300, 400)
    assert empty["samples"] == 0 and empty["min_mem_available_gib"] is None


def test_windowed_telemetry_accepts_rows_and_datetimes():
    class Row:
        def __init__(self, sample):
            self.ts = datetime.fromtimestamp(sample["ts"], tz=timezone.utc)
            self.data = {"mem": sample["mem"], "psi": sample["psi"]}

    rows = [Row(_sample(100.0, 9.0)), Row(_sample(500.0, 1.0))]
    start = datetime.fromtimestamp(50, tz=timezone.utc)
    end = datetime.fromtimestamp(200, tz=timezone.utc)
    t = windowed_telemetry(rows, start, end)
    assert t["samples"] == 1 and t["min_mem_available_gib"] == 9.0


def test_a_freeze_fails_the_profile_once_unless_told_not_to():
    froze = _profile(
        "C",
        freeze={"incident_id": 12, "kind": "unreachable", "resolution": "rebooted",
                "during": "workload tool_conversation"},
        workloads=[_workload(outcome="host_froze", cut_by_freeze=1)],
    )  # fmt: skip
    assert evaluate_gates(Gates(), froze) == (
        "FAIL",
        ["host froze during workload tool_conversation (incident 12, unreachable, rebooted)"],
    )
    # Counted, not failed: the workload cut short by the freeze is no failure of its own.
    assert evaluate_gates(Gates(fail_on_freeze=False), froze) == ("PASS", [])
    interrupted = _profile("D", workloads=[_workload(outcome="interrupted")])
    assert evaluate_gates(Gates(), interrupted) == ("PASS", [])
