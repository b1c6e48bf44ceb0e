"""Render a MatrixReport as Markdown (ready to paste into a bug report) or JSON; pure."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from collector.matrix.results import STARTUP_PHASE, MatrixReport, ProfileReport
from collector.matrix.served import LABELS, shown_keys
from collector.matrix.summary_report import config_value, summary_lines, table
from collector.matrix.telemetry import windowed_telemetry
from collector.schemas import OutModel

__all__ = ["MatrixReportOut", "render_json", "render_markdown", "windowed_telemetry"]

DASH = "—"


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _events(profile: ProfileReport, phase: str | None) -> str:
    hits = {k: n for k, n in (profile.kernel_events.get(phase or "") or {}).items() if n}
    text = ", ".join(f"{k} x{n}" for k, n in sorted(hits.items())) or "none"
    advice = profile.kernel_advice.get(phase or "")
    return f"{text} ({advice['severity']}: {advice['action']})" if hits and advice else text


def _guard(p: ProfileReport) -> str:
    fired, dry = (p.guard or {}).get("fired") or 0, (p.guard or {}).get("dry_run") or 0
    return f"{fired}" + (f" (+{dry} dry-run)" if dry else "") if p.guard else DASH


def _startup_rows(profiles: list[ProfileReport]) -> list[list[str]]:
    rows = []
    for p in profiles:
        plan = p.startup_plan
        rows.append(
            [
                _cell(p.label),
                _cell(p.description or None),
                _cell(p.startup.get("outcome")),
                _cell(p.startup.get("duration_s"), 0),
                _cell(plan.get("model_load_gib")),
                _cell(plan.get("drafter_loaded")),
                _cell(plan.get("cuda_graph_estimate_gib")),
                _cell(plan.get("kv_cache_gib")),
                _cell(plan.get("kv_cache_tokens")),
                _cell(plan.get("max_concurrency")),
                _events(p, STARTUP_PHASE),
            ]
        )
    return rows


def _served(value: Any) -> str:
    return DASH if value is None else _cell(config_value(value))


def _served_rows(profiles: list[ProfileReport], keys: list[str]) -> list[list[str]]:
    """vLLM's own value of each field, with the spec's ask where the two differ (or where the
    log does not say)."""
    rows = []
    for p in profiles:
        cells = [_cell(p.label)]
        for key in keys:
            text, asked = _served(p.startup_plan.get(key)), p.requested.get(key)
            if key in p.config_mismatch or (text == DASH and asked is not None):
                text += f" (spec: {_served(asked)})"
            cells.append(text)
        rows.append(cells)
    return rows


def _workload_rows(profiles: list[ProfileReport]) -> list[list[str]]:
    rows = []
    for p in profiles:
        for w in p.workloads:
            command = w.get("kind") == "command"
            rows.append(
                [
                    _cell(p.label),
                    _cell(w.get("name")),
                    _cell(w.get("outcome")),
                    _cell(w.get("requests")),
                    _cell(w.get("errors")),
                    _cell(w.get("timeouts")),
                    _cell(w.get("latency_median_s")),
                    _cell(w.get("latency_p95_s")),
                    _cell(w.get("latency_max_s") if not command else w.get("duration_s")),
                    _cell(w.get("over_30s")),
                    _cell(w.get("max_prompt_tokens")),
                    _cell(w.get("malformed_tool_calls")),
                    _events(p, w.get("name")),
                ]
            )
    return rows


def _telemetry_rows(profiles: list[ProfileReport]) -> list[list[str]]:
    rows = []
    for p in profiles:
        for w in p.workloads:
            t = p.telemetry.get(str(w.get("name")), {})
            rows.append(
                [
                    _cell(p.label),
                    _cell(w.get("name")),
                    _cell(t.get("samples")),
                    _cell(t.get("min_mem_available_gib")),
                    _cell(t.get("max_used_gib")),
                    _cell(t.get("max_swap_gib")),
                    _cell(t.get("max_psi_full_avg10")),
                ]
            )
    return rows


def render_markdown(report: MatrixReport) -> str:
    """Startup-memory, workload, windowed-telemetry and verdict tables, one row per profile."""
    title = f"## Matrix {report.name} on {report.host}"
    if report.run_id is not None:
        title += f" (run {report.run_id})"
    lines = [title, ""]
    if report.error:
        lines += [f"**{(report.status or 'failed').capitalize()}:** {_cell(report.error)}", ""]
    if report.status:
        lines += [f"Status: {report.status}", ""]
    lines += ["### Startup memory plan", ""]
    lines += table(
        [
            "Profile", "Changes", "Startup", "Startup s", "Model load GiB", "Drafter",
            "CUDA graph est. GiB", "KV cache GiB", "KV cache tokens", "Max concurrency",
            "Kernel events (startup)",
        ],
        _startup_rows(report.profiles),
    )  # fmt: skip
    keys = shown_keys(report.profiles)
    if keys:
        lines += ["", "### Serving configuration (as vLLM's log states it)", ""]
        lines += table(["Profile", *(LABELS[k] for k in keys)], _served_rows(report.profiles, keys))
    lines += ["", "### Workloads", ""]
    lines += table(
        [
            "Profile", "Workload", "Outcome", "Requests", "Errors", "Timeouts", "p50 s", "p95 s",
            "Max s", "> 30 s", "Max prompt tokens", "Malformed tool calls", "Kernel events",
        ],
        _workload_rows(report.profiles),
    )  # fmt: skip
    lines += ["", "### Host telemetry inside each workload window", ""]
    lines += table(
        [
            "Profile", "Workload", "Samples", "Min MemAvailable GiB", "Max used GiB",
            "Max swap GiB", "Max PSI full avg10",
        ],
        _telemetry_rows(report.profiles),
    )  # fmt: skip
    lines += ["", "### Verdicts", ""]
    lines += table(
        ["Profile", "Verdict", "Reasons", "Guard firings"],
        [
            [_cell(p.label), _cell(p.verdict), _cell("; ".join(p.reasons) or None), _guard(p)]
            for p in report.profiles
        ],
    )
    lines += summary_lines(report.summary, report.events)
    return "\n".join(lines) + "\n"


class MatrixReportOut(OutModel):
    """A run's report as :func:`render_json` writes it (and runs store it): one entry in
    ``profiles`` per profile x repetition, with the fields of
    :class:`collector.matrix.results.ProfileReport` and its ``label``."""

    model_config = ConfigDict(extra="allow")
    name: str
    host: str
    run_id: str | int | None
    status: str | None
    started_at: float | None
    ended_at: float | None
    profiles: list[dict[str, Any]]


def render_json(report: MatrixReport) -> dict[str, Any]:
    """The report as a JSON-able dict (what `/api/v1/matrix-runs/{id}` embeds)."""
    data = report.to_dict()
    for profile, source in zip(data["profiles"], report.profiles, strict=True):
        profile["label"] = source.label
    return data
