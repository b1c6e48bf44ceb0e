"""The memory plan's figures a start's profiling prints: the CUDA graph estimate, the KV cache
memory, size (tokens, or V0's blocks) and concurrency, each read across tensor-parallel ranks."""

from __future__ import annotations

from collector.vllm import log_formats as fmt
from collector.vllm.log_facts import Ctx, FactLog, VllmFact
from collector.vllm.plan import StartupPlan


def _num(text: str) -> float:
    return float(text.replace(",", ""))


class ProfilingLog(FactLog):
    """The profiling lines' handling: the KV cache is the smallest rank's, as vLLM sizes it."""

    def _profiling(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        m = fmt.CG_ESTIMATE.search(msg)
        if m and plan.cuda_graph_estimate_gib is None:
            value = float(m.group(1))
            self._set(plan, "cuda_graph_estimate_gib", value, ctx, facts)
            if value < 0:
                self._anomaly(plan, f"negative CUDA graph memory estimate: {value} GiB", ctx, facts)
        m = fmt.KV_GIB.search(msg)
        if m:
            value = float(next(g for g in m.groups() if g is not None))
            if self._smaller(plan, "kv_cache_gib", value, ctx, facts) and value < 0:
                self._anomaly(plan, f"negative available KV cache memory: {value} GiB", ctx, facts)
        m = fmt.KV_TOKENS.search(msg)
        if m:
            self._smaller(plan, "kv_cache_tokens", int(_num(m.group(1))), ctx, facts)
        m = fmt.KV_BLOCKS.search(msg)
        if m:
            blocks = int(_num(m.group(1)))
            if self._smaller(plan, "kv_cache_blocks", blocks, ctx, facts):
                self._set(plan, "kv_cache_tokens", blocks * plan.block_size, ctx, facts)
        m = fmt.MAX_CONC.search(msg)
        if m and self._smaller(plan, "max_concurrency", float(m.group(2)), ctx, facts):
            self._set(plan, "max_concurrency_tokens", int(_num(m.group(1))), ctx, facts)
