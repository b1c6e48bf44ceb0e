"""How the vLLM log parser records what it learns: facts, per-start plans and their phases.

Kept apart from the line patterns' handling in ``log_parser`` so each stays readable: this is
the bookkeeping every line's handling shares (a new start, a phase entered, a field set, the
outcome concluded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collector.vllm.log_formats import STARTING
from collector.vllm.log_outcome import OutcomeState
from collector.vllm.plan import StartupPlan

OUTCOME_PHASE = {"started": "serving", "failed": "failed", "crashed": "crashed"}
# Where a line is: (its stored ts, its line number, the log's own time text or None).
Ctx = tuple[float | None, int | None, str | None]


@dataclass
class VllmFact:
    """One thing a log line told us: kind is server_start, phase, plan, anomaly, outcome,
    hang_signal, stats or spec_decode; data holds its fields; plan_index says which start."""

    kind: str
    data: dict[str, Any]
    ts: float | None
    line_no: int | None
    plan_index: int
    # The caller's own reference for the line that said it (the live path's line id).
    ref: int | None = None
    # A hang signal held from before the first start, released later (``log_held``).
    held: bool = False


class FactLog:
    """The starts seen so far and the facts each line adds about them."""

    def __init__(self) -> None:
        self._plans: list[StartupPlan] = []
        self._state = OutcomeState()
        self._dropped = 0  # starts before the one ``restore`` brought back

    def _smaller(
        self,
        plan: StartupPlan,
        name: str,
        value: float,
        ctx: Ctx,
        facts: list[VllmFact],
    ) -> bool:
        """Keep ``value`` if it is the first or the smallest so far (tensor-parallel ranks)."""
        current = getattr(plan, name)
        if current is not None and current <= value:
            return False
        self._set(plan, name, value, ctx, facts)
        return True

    def _conclude(
        self, plan: StartupPlan, outcome: str, error: str | None, ctx: Ctx, facts: list[VllmFact]
    ) -> None:
        """The start's outcome and error from this line on, its phase, and the fact saying so."""
        self._enter(plan, OUTCOME_PHASE[outcome], ctx, facts)
        plan.outcome, plan.error = outcome, error
        facts.append(self._fact("outcome", {"outcome": outcome, "error": error}, ctx))

    def _new_plan(self, ctx: Ctx, facts: list[VllmFact]) -> StartupPlan:
        plan = StartupPlan(first_ts=ctx[0], first_line_no=ctx[1])
        self._plans.append(plan)
        self._state = OutcomeState()
        facts.append(self._fact("server_start", {}, ctx))
        return plan

    def _enter(self, plan: StartupPlan, phase: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        if plan.phase == phase:
            return
        if plan.phase in ("failed", "crashed") and phase in STARTING:
            return  # a worker's line delivered late (Ray) does not reopen a start that ended
        ts, line_no, log_time = ctx
        plan.phases.append({"phase": phase, "ts": ts, "line_no": line_no, "log_time": log_time})
        facts.append(self._fact("phase", {"phase": phase}, ctx))

    def _set(
        self, plan: StartupPlan, name: str, value: Any, ctx: Ctx, facts: list[VllmFact]
    ) -> None:
        setattr(plan, name, value)
        facts.append(self._fact("plan", {name: value}, ctx))

    def _anomaly(self, plan: StartupPlan, text: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        plan.anomalies.append(text)
        facts.append(self._fact("anomaly", {"anomaly": text}, ctx))

    def _fact(self, kind: str, data: dict[str, Any], ctx: Ctx) -> VllmFact:
        return VllmFact(kind, data, ctx[0], ctx[1], self._dropped + max(len(self._plans) - 1, 0))
