"""One vLLM server start as its log tells it: the memory plan and how the start went."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# Plan fields in the order `inspect vllm-log --json` prints them.
PLAN_FIELDS = (
    "vllm_version",
    "model_load_gib",
    "model_load_s",
    "drafter_loaded",
    "cuda_graph_estimate_gib",
    "kv_cache_gib",
    "kv_cache_tokens",
    "max_concurrency",
    "max_concurrency_tokens",
    "cuda_graph_pool_actual_gib",
    "cuda_graph_pool_estimated_gib",
    "outcome",
    "error",
    "phases",
)


@dataclass
class StartupPlan:
    """One server start: how vLLM planned its memory, and how the start went."""

    vllm_version: str | None = None
    model_load_gib: float | None = None
    model_load_s: float | None = None
    drafter_loaded: bool = False
    cuda_graph_estimate_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    cuda_graph_pool_actual_gib: float | None = None
    cuda_graph_pool_estimated_gib: float | None = None
    outcome: str = "incomplete"
    error: str | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    # Beyond the inspect contract: kept for the API and the human output.
    anomalies: list[str] = field(default_factory=list)
    cuda_graph_capture_gib: float | None = None
    cuda_graph_capture_s: float | None = None
    init_engine_s: float | None = None
    kv_cache_blocks: int | None = None  # V0: "# GPU blocks: N" (tokens = N x block_size)
    block_size: int | None = None  # as the start's lines state it; None: the device's default
    # The serving configuration the start's own lines state (``log_config``), what a matrix
    # of configurations varies: None where the log does not say.
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    attention_backend: str | None = None
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    # A "Using max model len" line stated max_model_len (a later one is a drafter's).
    model_len_resolved: bool = False
    first_line_no: int | None = None
    first_ts: float | None = None

    @property
    def phase(self) -> str | None:
        """The phase the server is in now (the last one entered)."""
        return self.phases[-1]["phase"] if self.phases else None

    def to_dict(self) -> dict[str, Any]:
        """The `inspect vllm-log --json` object: exactly PLAN_FIELDS."""
        return {name: _copy(getattr(self, name)) for name in PLAN_FIELDS}


def _copy(value: Any) -> Any:
    return [dict(p) for p in value] if isinstance(value, list) else value


def plan_state(plan: StartupPlan) -> dict[str, Any]:
    """The whole plan as JSON (a number that JSON cannot hold is left out)."""
    return {
        name: None if isinstance(value, float) and not math.isfinite(value) else value
        for name, value in asdict(plan).items()
    }
