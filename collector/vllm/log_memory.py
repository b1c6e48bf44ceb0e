"""The memory plan's figures a start's profiling prints: the CUDA graph estimate, the KV cache
memory, size (tokens, or V0's blocks) and concurrency, each read across tensor-parallel ranks."""

from __future__ import annotations

import re

from collector.vllm import log_formats as fmt
from collector.vllm.log_facts import Ctx, FactLog, VllmFact
from collector.vllm.plan import StartupPlan

# The free-memory advice after the capture (0.11+) restates the KV cache memory: "Current kv
# cache memory in use is 1.58 GiB." (its available_kv_cache_memory_bytes; 0.11 printed bytes).
KV_IN_USE = re.compile(r"Current kv cache memory in use is (\d+(?:\.\d+)?) (GiB|bytes)")
# V0's profile summary states the weights' memory: "model weights take 12.55GiB;".
WEIGHTS = re.compile(r"model weights take (\d+(?:\.\d+)?)GiB")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


class ProfilingLog(FactLog):
    """The profiling lines' handling: the KV cache is the smallest rank's, as vLLM sizes it."""

    def _profiling(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        m = fmt.CG_ESTIMATE.search(msg)
        if m:
            self._estimate(plan, float(m.group(1)), ctx, facts)
        m = WEIGHTS.search(msg)
        if m and plan.model_load_gib is None:  # the load line was not captured
            self._set(plan, "model_load_gib", float(m.group(1)), ctx, facts)
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
            blocks = int(_num(m.group(2)))
            if self._smaller(plan, "kv_cache_blocks", blocks, ctx, facts):
                size = plan.block_size or fmt.DEVICE_BLOCK_SIZE.get(m.group(1).lower())
                tokens = blocks * (size or fmt.DEFAULT_BLOCK_SIZE)
                self._set(plan, "kv_cache_tokens", tokens, ctx, facts)
            if blocks == 0 and plan.outcome == "incomplete":
                # V0 raises "No available memory for the cache blocks" right after: the
                # start failed (the exception's line, if captured, is its error).
                self._conclude(plan, "failed", None, ctx, facts)
        m = fmt.MAX_CONC.search(msg)
        if m and self._smaller(plan, "max_concurrency", float(m.group(2)), ctx, facts):
            self._set(plan, "max_concurrency_tokens", int(_num(m.group(1))), ctx, facts)

    def _estimate(self, plan: StartupPlan, value: float, ctx: Ctx, facts: list[VllmFact]) -> None:
        """The CUDA graph estimate of the rank that reserves most (ranks differ, and print in
        no order); a negative one on any rank is an anomaly."""
        current = plan.cuda_graph_estimate_gib
        if current is None or value > current:
            self._set(plan, "cuda_graph_estimate_gib", value, ctx, facts)
        if value < 0 and not any("CUDA graph memory estimate" in a for a in plan.anomalies):
            self._anomaly(plan, f"negative CUDA graph memory estimate: {value} GiB", ctx, facts)

    def _kv_in_use(self, plan: StartupPlan, msg: str, ctx: Ctx, facts: list[VllmFact]) -> None:
        """The KV cache memory the free-memory advice restates (the smallest rank's)."""
        m = KV_IN_USE.search(msg)
        if m:
            value = float(m.group(1)) / (2**30 if m.group(2) == "bytes" else 1)
            self._smaller(plan, "kv_cache_gib", round(value, 2), ctx, facts)
