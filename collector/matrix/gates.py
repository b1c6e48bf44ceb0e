"""Gates: a profile's results against the spec's thresholds give PASS or FAIL with reasons."""

from __future__ import annotations

from collector.matrix.results import STARTUP_PHASE, ProfileReport
from collector.matrix.spec import Gates
from collector.models import StepOutcome

# Outcomes that are not the profile's doing: the freeze gate and the restart speak for them.
NOT_FAILURES = (None, StepOutcome.OK, StepOutcome.HOST_FROZE, StepOutcome.INTERRUPTED)


def _freeze_reasons(gates: Gates, profile: ProfileReport) -> list[str]:
    freeze = profile.freeze
    if not gates.fail_on_freeze or freeze is None:
        return []
    became = f", {freeze['resolution']}" if freeze.get("resolution") else ""
    return [
        f"host froze during {freeze['during']} (incident {freeze['incident_id']}, "
        f"{freeze['kind']}{became})"
    ]


def _startup_reasons(profile: ProfileReport) -> list[str]:
    outcome = profile.startup.get("outcome")
    if outcome in NOT_FAILURES:
        return []
    error = profile.startup.get("error")
    return [f"startup {outcome}" + (f": {error}" if error else "")]


def _kernel_reasons(gates: Gates, profile: ProfileReport) -> list[str]:
    reasons = []
    for phase, kinds in profile.kernel_events.items():
        hits = {k: n for k, n in kinds.items() if k in gates.fail_on_kernel and n > 0}
        if hits:
            where = "startup" if phase == STARTUP_PHASE else f"workload {phase}"
            listed = ", ".join(f"{kind} x{n}" for kind, n in sorted(hits.items()))
            reasons.append(f"kernel events during {where}: {listed}")
    return reasons


def _workload_reasons(gates: Gates, profile: ProfileReport) -> list[str]:
    reasons = []
    errors = 0
    malformed = 0
    for w in profile.workloads:
        name = w.get("name")
        if w.get("outcome") not in NOT_FAILURES:
            detail = f" (exit status {w['exit_status']})" if w.get("exit_status") else ""
            reasons.append(f"workload {name} {w['outcome']}{detail}")
        errors += w.get("errors") or 0
        malformed += w.get("malformed_tool_calls") or 0
        p95 = w.get("latency_p95_s")
        if (
            gates.max_p95_latency_s is not None
            and p95 is not None
            and p95 > gates.max_p95_latency_s
        ):
            reasons.append(
                f"workload {name}: p95 latency {p95:.2f} s > {gates.max_p95_latency_s:g} s"
            )
    if gates.max_errors is not None and errors > gates.max_errors:
        reasons.append(f"{errors} request errors > max_errors {gates.max_errors}")
    limit = gates.max_malformed_tool_calls
    if limit is not None and malformed > limit:
        reasons.append(f"{malformed} malformed tool calls > max_malformed_tool_calls {limit}")
    return reasons


def _memory_reasons(gates: Gates, profile: ProfileReport) -> list[str]:
    limit = gates.min_mem_available_gib
    if limit is None:
        return []
    reasons = []
    for w in profile.workloads:
        window = profile.telemetry.get(str(w.get("name")), {})
        low = window.get("min_mem_available_gib")
        if low is None:
            # Missing data must not read as headroom: a frozen host sends no samples.
            reasons.append(f"workload {w.get('name')}: no MemAvailable samples in its window")
        elif low < limit:
            reasons.append(
                f"workload {w.get('name')}: MemAvailable fell to {low:.2f} GiB < {limit:g} GiB"
            )
    return reasons


def _guard_reasons(profile: ProfileReport) -> list[str]:
    """A profile that needed the guard did not pass, whatever else it did."""
    guard = profile.guard or {}
    rules = ", ".join(guard.get("rules") or [])
    reasons = []
    if guard.get("fired"):
        reasons.append(f"the guard fired x{guard['fired']} ({rules})")
    if guard.get("dry_run"):
        reasons.append(f"the guard would have fired x{guard['dry_run']} (dry-run: {rules})")
    return reasons


def evaluate_gates(gates: Gates, profile_result: ProfileReport) -> tuple[str, list[str]]:
    """("PASS", []) or ("FAIL", reasons); a failed startup or workload always fails, a freeze
    does unless ``fail_on_freeze`` is off."""
    reasons = (
        _freeze_reasons(gates, profile_result)
        + _startup_reasons(profile_result)
        + _kernel_reasons(gates, profile_result)
        + _workload_reasons(gates, profile_result)
        + _memory_reasons(gates, profile_result)
        + _guard_reasons(profile_result)
    )
    return ("FAIL" if reasons else "PASS"), reasons
