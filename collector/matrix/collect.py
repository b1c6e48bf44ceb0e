"""Build a run's report from what the store holds: its steps, the server's vLLM lines, the
host's kernel lines and the agent's samples, each inside the step windows it belongs to.

A pure read of the store, so the runner can rebuild it after late agent batches arrived.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from agent.kernel.classify import SEVERITIES
from agent.kernel.xid_catalog import ACTIONS
from collector.kernel.restated import StoredRecord, counted_events, kernel_usec
from collector.matrix.argv import describe_profile, profile_args, remote_argv
from collector.matrix.gates import evaluate_gates
from collector.matrix.results import STARTUP_PHASE, STARTUP_PLAN_KEYS, MatrixReport, ProfileReport
from collector.matrix.served import config_mismatch, requested_config
from collector.matrix.spec import MatrixSpec
from collector.matrix.summary import summarize
from collector.matrix.telemetry import windowed_telemetry
from collector.models import (
    KERNEL_SOURCES,
    Host,
    Incident,
    Line,
    MatrixRun,
    MatrixStep,
    Sample,
    StepOutcome,
)
from collector.readback.guard_events import guard_firings
from collector.timeutil import to_epoch
from collector.vllm.log_parser import parse_vllm_log

JOURNAL_KERNEL_FACILITY = 0


def _end(step: MatrixStep) -> float:
    return step.ended_at if step.ended_at is not None else step.started_at


def server_lines(
    session: Session, *, run: MatrixRun, profile: str, repetition: int, start: float, end: float
) -> list[str]:
    """The server's stored log lines of one profile x repetition, in arrival order."""
    rows = session.scalars(
        select(Line)
        .where(
            Line.host_id == run.host_id,
            Line.source == "vllm",
            Line.ts >= start,
            Line.ts <= end,
        )
        .order_by(Line.ts, Line.id)
    )
    return [
        row.text
        for row in rows
        if (f := row.fields or {}).get("matrix_run") == run.id
        and f.get("profile") == profile
        and f.get("repetition") == repetition
    ]


def kernel_findings(
    session: Session, *, host_id: int, start: float, end: float
) -> tuple[dict[str, int], dict[str, str] | None]:
    """Kernel events of the host (kmsg, netconsole, journal kernel facility) in [start, end]:
    kind → count, and the worst severity and strongest action among them (None: no event).
    Each report counts once, as the live path stores its events (``restated``): an SError's
    panic, an Xid 79's fall line, an SXid's dump add nothing."""
    rows = session.execute(
        select(Line.id, Line.ts, Line.fields, Line.text)
        .where(
            Line.host_id == host_id,
            Line.ts >= start,
            Line.ts <= end,
            or_(
                Line.source.in_(KERNEL_SOURCES),
                (Line.source == "journal") & (Line.facility == JOURNAL_KERNEL_FACILITY),
            ),
        )
        .order_by(Line.ts, Line.id)
    )
    window: list[StoredRecord] = []
    seen: set[str] = set()
    for line_id, ts, fields, text in rows:
        # The same record may arrive over kmsg and netconsole; count it once.
        if text in seen:
            continue
        seen.add(text)
        window.append(StoredRecord(line_id, ts, kernel_usec(fields), text))
    counts: Counter[str] = Counter()
    severity = action = None
    for event in counted_events(window):
        counts[event.kind] += 1
        severity = max(severity or event.severity, event.severity, key=SEVERITIES.index)
        action = max(action or event.action, event.action, key=ACTIONS.index)
    advice = {"severity": severity, "action": action} if severity and action else None
    return dict(counts), advice


def kernel_event_counts(
    session: Session, *, host_id: int, start: float, end: float
) -> dict[str, int]:
    """Kernel events of the host in [start, end], by kind."""
    return kernel_findings(session, host_id=host_id, start=start, end=end)[0]


def window_samples(session: Session, *, host_id: int, start: float, end: float) -> list[Sample]:
    return list(
        session.scalars(
            select(Sample)
            .where(Sample.host_id == host_id, Sample.ts >= start, Sample.ts <= end)
            .order_by(Sample.ts)
        )
    )


def guard_counts(session: Session, *, host_id: int, start: float, end: float) -> dict[str, Any]:
    """The agent guard's firings and dry-run matches on the host in [start, end]."""
    firings = guard_firings(session, host_id=host_id, since=start, until=end)
    return {
        "fired": sum(not f.dry_run for f in firings),
        "dry_run": sum(f.dry_run for f in firings),
        "rules": sorted({str(f.rule) for f in firings}),
    }


def _startup(start: MatrixStep | None, health: MatrixStep | None) -> dict[str, Any]:
    if start is None:
        return {"outcome": "skipped"}
    if start.outcome != "ok" or health is None:
        return {
            "outcome": start.outcome or "failed",
            "started_at": start.started_at,
            "healthy_at": None,
            "duration_s": None,
            "error": (start.detail or {}).get("error"),
        }
    healthy = health.ended_at if health.outcome == "ok" else None
    return {
        "outcome": health.outcome,
        "started_at": start.started_at,
        "healthy_at": healthy,
        "duration_s": round(healthy - start.started_at, 3) if healthy else None,
        "error": (health.detail or {}).get("error"),
    }


def profile_report(
    session: Session, *, run: MatrixRun, spec: MatrixSpec, steps: list[MatrixStep]
) -> ProfileReport:
    """One profile x repetition from its steps (all of the same profile and repetition)."""
    profile, repetition = steps[0].profile, steps[0].repetition
    by_kind: dict[str, list[MatrixStep]] = {}
    for step in steps:
        by_kind.setdefault(step.kind, []).append(step)
    first = {kind: group[0] for kind, group in by_kind.items()}
    start, health = first.get("start"), first.get("health")
    report = ProfileReport(
        profile=profile,
        repetition=repetition,
        description=describe_profile(spec, profile),
        argv=remote_argv(spec, profile),
        startup=_startup(start, health),
        requested=requested_config(profile_args(spec, profile)),
    )
    window_start = min(s.started_at for s in steps)
    window_end = max(_end(s) for s in steps)
    if start is not None:
        lines = server_lines(
            session,
            run=run,
            profile=profile,
            repetition=repetition,
            start=window_start,
            end=window_end,
        )
        plans = parse_vllm_log(lines)
        plan = plans[-1] if plans else None
        report.startup_plan = {key: getattr(plan, key, None) for key in STARTUP_PLAN_KEYS}
        report.config_mismatch = config_mismatch(report.requested, report.startup_plan)
        startup_end = _end(health) if health is not None else _end(start)
        _kernel(report, STARTUP_PHASE, session, run.host_id, start.started_at, startup_end)
    for step in by_kind.get("workload", []):
        figures = dict(step.detail or {})
        figures.setdefault("name", step.name)
        report.workloads.append(figures)
        lo = figures.get("started_at") or step.started_at
        hi = figures.get("ended_at") or _end(step)
        _kernel(report, step.name, session, run.host_id, lo, hi)
        samples = window_samples(session, host_id=run.host_id, start=lo, end=hi)
        report.telemetry[step.name] = windowed_telemetry(samples, lo, hi)
    report.guard = guard_counts(session, host_id=run.host_id, start=window_start, end=window_end)
    report.freeze = _freeze(session, steps)
    report.reboot = _reboot(first.get("reboot"))
    report.interrupted = any(s.outcome == StepOutcome.INTERRUPTED for s in steps)
    report.verdict, report.reasons = evaluate_gates(spec.gates, report)
    if report.interrupted and report.verdict == "PASS":
        report.verdict, report.reasons = "INCOMPLETE", ["cut short by a collector restart"]
    return report


def _kernel(
    report: ProfileReport, phase: str, session: Session, host_id: int, lo: float, hi: float
) -> None:
    counts, advice = kernel_findings(session, host_id=host_id, start=lo, end=hi)
    report.kernel_events[phase] = counts
    if advice is not None:
        report.kernel_advice[phase] = advice


def _freeze(session: Session, steps: list[MatrixStep]) -> dict[str, Any] | None:
    """The incident that froze the host during this unit, with what it turned out to be."""
    step = next((s for s in steps if s.outcome == StepOutcome.HOST_FROZE), None)
    if step is None:
        return None
    brief = (step.detail or {}).get("incident") or {}
    incident = session.get(Incident, brief["id"]) if brief.get("id") else None
    return {
        "incident_id": brief.get("id"),
        "kind": brief.get("kind"),
        "resolution": incident.resolution if incident is not None else None,
        "during": f"{step.kind} {step.name}",
    }


def _reboot(step: MatrixStep | None) -> dict[str, Any] | None:
    if step is None:
        return None
    detail = step.detail or {}
    keys = ("from_boot_id", "to_boot_id", "boot_s", "waited_s", "incidents", "power_cycles")
    return {"outcome": step.outcome, **{key: detail.get(key) for key in keys}}


def build_report(session: Session, *, run_id: int) -> MatrixReport:
    """The run's report from its steps and the store, one ProfileReport per profile x rep."""
    run = session.get(MatrixRun, run_id)
    if run is None:
        raise LookupError(f"no matrix run {run_id}")
    spec = MatrixSpec.model_validate(run.spec)
    host = session.get(Host, run.host_id)
    steps = session.scalars(
        select(MatrixStep).where(MatrixStep.run_id == run_id).order_by(MatrixStep.id)
    ).all()
    groups: dict[tuple[str, int], list[MatrixStep]] = {}
    for step in steps:
        groups.setdefault((step.profile, step.repetition), []).append(step)
    profiles = [
        profile_report(session, run=run, spec=spec, steps=group) for group in groups.values()
    ]
    return MatrixReport(
        name=run.name,
        host=host.name if host else spec.host,
        run_id=run.id,
        status=run.status,
        started_at=to_epoch(run.started_at),
        ended_at=to_epoch(run.ended_at),
        error=run.error,
        profiles=profiles,
        summary=summarize(profiles, list(spec.profiles)),
        events=list(run.events or []),
    )
