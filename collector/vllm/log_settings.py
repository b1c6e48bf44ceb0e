"""What a start's own lines state about how it serves: its block size, its serving
configuration (``log_config``'s fields, the engine's line refining the args) and its drafter."""

from __future__ import annotations

from collector.vllm import log_formats as fmt
from collector.vllm.log_config import FIRST_STATED, GPU_UTILIZATION, MAX_MODEL_LEN, config_fields
from collector.vllm.log_facts import Ctx, VllmFact
from collector.vllm.log_memory import ProfilingLog
from collector.vllm.plan import StartupPlan


class StartSettingsLog(ProfilingLog):
    """The settings' handling, for the parser (its start lines and its plan lines)."""

    def _start_of(self, ctx: Ctx, facts: list[VllmFact]) -> StartupPlan:
        """The start a start line (the banner, the args, the engine's config) belongs to: the
        current one while it starts, or where the line is stamped before that start's latest
        phase on the same day (a report that pasted its plan first, its settings after it);
        else a new one."""
        plan = self._plans[-1] if self._plans else None
        if plan is not None and _stamped_before(ctx[2], plan):
            return plan
        if plan is None or plan.phase not in (None, "starting"):
            plan = self._new_plan(ctx, facts)
        self._enter(plan, "starting", ctx, facts)
        return plan

    def _start_settings(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        """What a start line (or its wrapped rest) states: the block size, config, drafter."""
        self._block_size(plan, msg)
        self._config(plan, msg, ctx, facts)
        self._drafter(plan, msg, ctx, facts)

    def _block_size(self, plan: StartupPlan, msg: str) -> None:
        m = fmt.BLOCK_SIZE.search(msg)
        if m:
            plan.block_size = int(next(g for g in m.groups() if g is not None))

    def _config(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        """The serving configuration a start line states; the engine's line, later, refines
        the args (its resolved dtype and max model len), except where the first word stands
        (``FIRST_STATED``). The first "Using max model len" line is the target model's: a
        drafter's config (EAGLE, MTP, a draft model) follows it with its own length. A memory
        line's utilization, rounded (V0's 0.88 for 0.875), only fills one the args left unsaid."""
        resolves_len = MAX_MODEL_LEN.search(msg) is not None
        restated = GPU_UTILIZATION.search(msg) is not None
        for name, value in config_fields(msg).items():
            current = getattr(plan, name)
            first = name in FIRST_STATED or (
                (name == "max_model_len" and resolves_len and plan.model_len_resolved)
                or (name == "gpu_memory_utilization" and restated)
            )
            if current != value and (current is None or not first):
                self._set(plan, name, value, ctx, facts)
        plan.model_len_resolved = plan.model_len_resolved or resolves_len

    def _drafter(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        """A drafter's load line, an MTP architecture, or a speculative config (also in the
        start's own lines: the non-default args and the engine's config line)."""
        if fmt.DRAFTER.search(msg) or fmt.SPEC_CONFIG.search(msg):
            if fmt.DRAFTER_LOAD.search(msg):
                self._enter(plan, "loading_drafter", ctx, facts)
            if not plan.drafter_loaded:
                self._set(plan, "drafter_loaded", True, ctx, facts)


def _stamped_before(log_time: str | None, plan: StartupPlan) -> bool:
    """``log_time`` ("MM-DD HH:MM:SS") is earlier on the day of the start's latest phase."""
    last = plan.phases[-1]["log_time"] if plan.phases else None
    return bool(log_time and last and log_time[:5] == last[:5] and log_time < last)
