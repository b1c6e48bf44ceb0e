"""Understand vLLM's own log: per server start, the phase timeline and the startup memory plan.

The formats it follows are in ``log_formats`` (0.5 → today), how a start ends in
``log_outcome``, the settings its lines state in ``log_settings``, its profiling figures in
``log_memory`` (with tensor parallelism every rank
prints its own and vLLM sizes every rank to the smallest, so the plan keeps the minimum).
Incremental: feed lines as they arrive from a live stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any

from agent.wire import VLLM_PHASES
from collector.vllm import log_formats as fmt
from collector.vllm.log_config import config_fields
from collector.vllm.log_facts import Ctx, VllmFact
from collector.vllm.log_hangs import hang_signal
from collector.vllm.log_held import HOLD_LINES, HOLD_S, HeldSignals
from collector.vllm.log_lines import VllmLine, records, split_vllm_line
from collector.vllm.log_outcome import (
    OutcomeState,
    loose_traceback,
    opens_start,
    opens_under_way,
    outcome_of,
)
from collector.vllm.log_settings import StartSettingsLog
from collector.vllm.log_stats import spec_fields, stats_fields
from collector.vllm.log_traceback import is_exception
from collector.vllm.log_wrap import rejoined
from collector.vllm.plan import StartupPlan, plan_state

PHASES = VLLM_PHASES  # shared with the agent (its guard can act only in given phases)
__all__ = ["HOLD_LINES", "HOLD_S", "PHASES", "VllmFact", "VllmLogParser", "parse_vllm_log"]


class VllmLogParser(StartSettingsLog):
    """Incremental parser for one vLLM log stream (one host/container)."""

    def __init__(self) -> None:
        super().__init__()
        self._line_count = 0
        # The attention backend chosen before the capture showed any start: its start's, if
        # one opens on a later line (vLLM selects it after the start lines, before the load).
        self._early_backend: str | None = None
        # The last record's message (a settings line: so far), while the next line may be a
        # paste's or a terminal's wrap of it (``_wrapped``).
        self._last_message: str | None = None
        # The writer vLLM's own lines come from, as a shipper names it (``VllmLine.source``).
        self._source = ""
        # Quiet-while-starting signals seen before any start (``log_held``).
        self._held = HeldSignals()
        self._ref: int | None = None  # the caller's reference for the line being read

    def snapshot(self) -> dict[str, Any]:
        """What the next line's parsing depends on, as JSON: the current start (the earlier
        ones are stored and done), the line count and how the start is ending."""
        plan = self.current
        return {
            "lines": self._line_count,
            "before": self._dropped + max(len(self._plans) - 1, 0),
            "plan": None if plan is None else plan_state(plan),
            "outcome": asdict(self._state),
            "early_backend": self._early_backend,
            "engine_config": self._last_message,  # its old name: saved states still load
            "source": self._source,
            "held": self._held.state(),
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> VllmLogParser:
        """A parser that goes on where the one that took ``snapshot`` stopped."""
        parser = cls()
        parser._line_count = int(snapshot["lines"])
        parser._dropped = int(snapshot["before"])
        if snapshot["plan"] is not None:
            parser._plans = [StartupPlan(**snapshot["plan"])]
        parser._state = OutcomeState(**snapshot["outcome"])
        parser._early_backend = snapshot.get("early_backend")
        parser._last_message = snapshot.get("engine_config")
        parser._source = snapshot.get("source", "")
        parser._held = HeldSignals(snapshot.get("held"))
        return parser

    def plans(self) -> list[StartupPlan]:
        """All server starts seen so far, oldest first (the last may still be in progress)."""
        return list(self._plans)

    @property
    def current(self) -> StartupPlan | None:
        """The latest server start, if any."""
        return self._plans[-1] if self._plans else None

    def feed(
        self,
        line: str,
        ts: float | None = None,
        line_no: int | None = None,
        ref: int | None = None,
    ) -> list[VllmFact]:
        """Parse one log line; return the facts it adds (empty for most lines). ``ref``: the
        caller's own reference for the line (a held hang signal's fact carries its line's)."""
        self._line_count += 1
        if line_no is None:
            line_no = self._line_count
        self._ref = ref
        return [fact for record in records(line) for fact in self._settled(record, ts, line_no)]

    def finish(self) -> list[VllmFact]:
        """The input ended (a saved log's end): the signals still held are hang signals."""
        return self._held.release(self._dropped)

    def _settled(self, record: str, ts: float | None, line_no: int) -> list[VllmFact]:
        """A record's facts, after the held signals where this record settles them: the first
        start opened (mid-start: dropped), or none came in time (released)."""
        held = bool(self._held)
        facts = self._record(record, ts, line_no)
        if not held:
            return facts
        if self.current is not None and opens_under_way(split_vllm_line(record).msg):
            self._held.drop()
        elif self.current is not None or self._held.due(self._line_count, ts):
            return self._held.release(self._dropped) + facts
        return facts

    def _record(self, line: str, ts: float | None, line_no: int) -> list[VllmFact]:
        config, self._last_message = self._last_message, None
        if not line.strip():
            return []
        parsed = split_vllm_line(line)
        if parsed.level or parsed.proc:
            self._source = parsed.source
        msg = parsed.msg
        facts: list[VllmFact] = []
        ctx = (ts, line_no, parsed.log_time)
        if config is not None and self._wrapped(config, parsed, ctx, facts):
            return facts
        self._last_message = msg if parsed.level else None

        if "Avg prompt throughput" in msg or "hit rate: GPU: " in msg:
            return self._metrics("stats", stats_fields(msg), parsed, ctx, facts)
        if "metrics: " in msg and fmt.SPEC.search(msg):
            return self._metrics("spec_decode", spec_fields(msg), parsed, ctx, facts)
        phase = self.current.phase if self.current else None
        signal = hang_signal(msg, phase)
        if signal is not None:
            data = {"signal": signal, "phase": phase, "line": parsed.clean}
            fact = self._fact("hang_signal", data, ctx)
            fact.ref = self._ref
            facts.extend(self._held.admit(fact, msg, self._line_count, self.current is not None))

        if fmt.START_MARK.search(msg):
            self._early_backend = None  # chosen by an earlier run
            start = self._start_of(ctx, facts)
            v = fmt.VERSION.search(msg)
            if v and start.vllm_version is None:
                version = v.group("v") or v.group("v2") or v.group("v3")
                self._set(start, "vllm_version", version, ctx, facts)
            self._start_settings(start, msg, ctx, facts)
            return facts

        plan = self._plans[-1] if self._plans else None
        if fmt.LOAD_START.search(msg):
            ended = plan is not None and plan.phase in ("serving", "stopped", "failed", "crashed")
            if plan is None or (ended and not fmt.LOAD_UNDER_WAY.search(msg)):
                plan = self._new_plan(ctx, facts)
            if plan.phase in (None, "starting"):
                self._enter(plan, "loading_weights", ctx, facts)
        if plan is None:
            loose = loose_traceback(self._state, msg, parsed.clean)
            if loose is not None:
                return self._loose_start(loose, ctx, facts)
            if not opens_start(msg, server=parsed.source == self._source):
                self._before_start(msg)
                return facts
            # A capture that begins at a root cause (an OOM, a CUDA fault), at a failure line
            # either a start or a run logs (``EITHER_FAIL``) or at a bare traceback's exception:
            # the start failed, or its engine died serving; what follows (a crash line, a
            # busy-loop frame) says which.
            guessed = (fmt.ROOT_CAUSE.search(msg) or fmt.EITHER_FAIL.search(msg)) is not None or (
                self._state.loose and is_exception(msg)
            )
            plan = self._new_plan(ctx, facts)
            self._state.guessed = guessed
        self._plan_line(plan, parsed, ctx, facts)
        if self._state.awaiting_error and is_exception(msg):
            self._state.awaiting_error = False  # the traceback's last line: its error
            self._conclude(plan, plan.outcome, parsed.clean, ctx, facts)
        return facts

    def _new_plan(self, ctx: Ctx, facts: list[VllmFact]) -> StartupPlan:
        """A start, with the backend chosen before the capture showed it (``_before_start``)."""
        plan = super()._new_plan(ctx, facts)
        if self._early_backend is not None:
            self._set(plan, "attention_backend", self._early_backend, ctx, facts)
            self._early_backend = None
        return plan

    def _before_start(self, msg: str) -> None:
        """A line before any start: the backend's selection is kept for the start to come,
        unless the server stops first (what starts next is another run)."""
        if fmt.STOPPED.search(msg):
            self._early_backend = None
        elif self._early_backend is None:
            self._early_backend = config_fields(msg).get("attention_backend")

    def _metrics(
        self,
        kind: str,
        data: dict[str, Any] | None,
        parsed: VllmLine,
        ctx: Ctx,
        facts: list[VllmFact],
    ) -> list[VllmFact]:
        """A stats or spec-decode line. Only a running engine logs them: a capture that starts
        here is serving."""
        if data is None:
            return facts
        running = self.current or self._new_plan(ctx, facts)
        self._outcome(running, parsed, ctx, facts)
        facts.append(self._fact(kind, data, ctx))
        return facts

    def _loose_start(self, outcome: str, ctx: Ctx, facts: list[VllmFact]) -> list[VllmFact]:
        """A start seen only as the middle of its traceback: it failed or crashed where the
        frame says; its error is the exception line already seen, else the one to come."""
        error = self._state.loose_error
        plan = self._new_plan(ctx, facts)
        self._conclude(plan, outcome, error, ctx, facts)
        self._state.awaiting_error = error is None
        return facts

    def _wrapped(self, last: str, parsed: VllmLine, ctx: Ctx, facts: list[VllmFact]) -> bool:
        """This bare line goes on with the last record (``log_wrap``): read again whole, a
        settings line's value or name cut in two, or a plan figure, reads right."""
        plan, whole = self.current, rejoined(last, parsed)
        if plan is None or whole is None:
            return False
        settings, msg = whole
        if settings:
            self._last_message = msg
            self._start_settings(plan, msg, ctx, facts)
        else:
            self._plan_line(plan, replace(parsed, msg=msg), ctx, facts)
        return True

    def _plan_line(
        self, plan: StartupPlan, parsed: VllmLine, ctx: Ctx, facts: list[VllmFact]
    ) -> None:
        msg = parsed.msg
        if "Initializing" in msg or "block_size" in msg or "block size" in msg:
            self._block_size(plan, msg)
        self._config(plan, msg, ctx, facts)
        self._drafter(plan, msg, ctx, facts)
        m = fmt.MODEL_LOAD.search(msg) or fmt.MODEL_LOAD_V0.search(msg)
        if m and plan.phase is None:  # a capture that begins at the weights' load line
            self._enter(plan, "loading_weights", ctx, facts)
        if m and plan.model_load_gib is None:
            self._set(plan, "model_load_gib", float(m.group(1)), ctx, facts)
            if m.re is fmt.MODEL_LOAD:
                self._set(plan, "model_load_s", float(m.group(2)), ctx, facts)
        if fmt.PROFILING.search(msg):
            self._enter(plan, "profiling", ctx, facts)
            self._profiling(plan, msg, ctx, facts)
        else:
            self._kv_in_use(plan, msg, ctx, facts)
        if fmt.CAPTURE.search(msg):
            self._enter(plan, "capturing_cuda_graphs", ctx, facts)
            m = fmt.CAPTURE_DONE.search(msg)
            if m and plan.cuda_graph_capture_s is None:
                self._set(plan, "cuda_graph_capture_s", float(m.group(1)), ctx, facts)
                if m.group(2) is not None:
                    self._set(plan, "cuda_graph_capture_gib", float(m.group(2)), ctx, facts)
        m = fmt.POOL.search(msg)
        if m and plan.cuda_graph_pool_actual_gib is None:
            self._set(plan, "cuda_graph_pool_actual_gib", float(m.group(1)), ctx, facts)
            self._set(plan, "cuda_graph_pool_estimated_gib", float(m.group(2)), ctx, facts)
        m = fmt.INIT_ENGINE.search(msg)
        if m and plan.init_engine_s is None:
            self._set(plan, "init_engine_s", float(m.group(1)), ctx, facts)
        self._outcome(plan, parsed, ctx, facts)
        if fmt.STOPPED.search(msg) and plan.phase not in ("stopped", "failed", "crashed"):
            self._enter(plan, "stopped", ctx, facts)

    def _outcome(
        self, plan: StartupPlan, parsed: VllmLine, ctx: Ctx, facts: list[VllmFact]
    ) -> None:
        result = outcome_of(
            self._state,
            outcome=plan.outcome,
            level=parsed.level,
            msg=parsed.msg,
            clean=parsed.clean,
            proc=parsed.proc,
            error=plan.error,
            phase=plan.phase,
            server=parsed.source == self._source,
            ready=plan.init_engine_s is not None,
        )
        if result is None:
            return
        self._state.root_cause = self._state.root_cause or result.root_cause
        self._conclude(plan, result.outcome, result.error, ctx, facts)


def parse_vllm_log(lines: Iterable[str]) -> list[StartupPlan]:
    """Every server start in a saved vLLM log, oldest first."""
    parser = VllmLogParser()
    for line in lines:
        parser.feed(line)
    parser.finish()
    return parser.plans()
