"""The result structures a matrix runner fills and reports, gates and the API read.

Everything inside is plain JSON-able data so a run persists as JSON and reloads with
`MatrixReport.from_dict`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from collector.matrix.served import CONFIG_KEYS

# startup_plan keys (values None when the server log did not say): the memory plan, then the
# serving configuration vLLM states at start (served.CONFIG_KEYS: tensor_parallel_size, ...,
# max_model_len, gpu_memory_utilization, dtype, quantization, kv_cache_dtype, enforce_eager).
STARTUP_PLAN_KEYS = (
    "model_load_gib",  # "Model loading took X GiB ..."
    "drafter_loaded",  # "Loading drafter model..." seen
    "cuda_graph_estimate_gib",  # "Estimated CUDA graph memory: X GiB total" (may be negative)
    "kv_cache_gib",  # "Available KV cache memory: X GiB"
    "kv_cache_tokens",  # "GPU KV cache size: N tokens"
    "max_concurrency",  # "Maximum concurrency for N tokens per request: X"
    *CONFIG_KEYS,
)
STARTUP_OUTCOMES = ("ok", "failed", "timeout", "cancelled", "skipped")
STARTUP_PHASE = "startup"


@dataclass
class ProfileReport:
    """One profile x repetition.

    - `startup`: {"outcome": one of STARTUP_OUTCOMES, "started_at", "healthy_at", "duration_s",
      "error"} (epoch seconds).
    - `startup_plan`: STARTUP_PLAN_KEYS → value (what vLLM's own log says).
    - `requested`: the serving configuration the profile's server args ask for
      (`served.requested_config`); `config_mismatch`: field → {"requested", "reported"} where
      vLLM's log states another value (`served.config_mismatch`).
    - `kernel_events`: phase ("startup" or a workload name) → kernel event kind → count.
    - `kernel_advice`: phase → {"severity": the worst, "action": the strongest} of its events.
    - `workloads`: `WorkloadResult.figures()` or `summarize_command_result(...)` dicts, in order.
    - `telemetry`: workload name → `windowed_telemetry(samples, start, end)`.
    - `guard`: the agent guard inside the profile's window: {"fired": n, "dry_run": n (matches
      that would have fired), "rules": [rule, ...]}; a profile that needed the guard fails.
    - `freeze`: {"incident_id", "kind", "resolution", "during"} when the host froze.
    - `reboot`: the cold boot before it, {"from_boot_id", "to_boot_id", "boot_s", "outcome"}.
    - `interrupted`: a collector restart cut it short (left out of the campaign's N).
    """

    profile: str
    repetition: int = 1
    description: str = ""
    argv: list[str] = field(default_factory=list)
    startup: dict[str, Any] = field(default_factory=dict)
    startup_plan: dict[str, Any] = field(default_factory=dict)
    requested: dict[str, Any] = field(default_factory=dict)
    config_mismatch: dict[str, dict[str, Any]] = field(default_factory=dict)
    kernel_events: dict[str, dict[str, int]] = field(default_factory=dict)
    kernel_advice: dict[str, dict[str, str]] = field(default_factory=dict)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    telemetry: dict[str, dict[str, Any]] = field(default_factory=dict)
    guard: dict[str, Any] = field(default_factory=dict)
    verdict: str | None = None
    reasons: list[str] = field(default_factory=list)
    freeze: dict[str, Any] | None = None
    reboot: dict[str, Any] | None = None
    interrupted: bool = False

    @property
    def label(self) -> str:
        return self.profile if self.repetition == 1 else f"{self.profile} #{self.repetition}"


@dataclass
class MatrixReport:
    """A matrix run's results: one ProfileReport per profile x repetition, in run order;
    `error` says why a failed run failed; `summary` is `summary.summarize` across repetitions."""

    name: str
    host: str
    run_id: str | int | None = None
    status: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    profiles: list[ProfileReport] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatrixReport:
        profiles = [ProfileReport(**p) for p in data.get("profiles", [])]
        return cls(**{**data, "profiles": profiles})


@dataclass
class WorkloadResult:
    """Summary figures of one workload run; `figures()` is what reports and gates read.

    `errors` counts failed requests (HTTP non-2xx, transport errors, unreadable bodies and
    timeouts); `timeouts` is the subset that hit `request_timeout_s`; `cut_by_freeze` the
    requests in flight when the host froze (not errors). Latency figures cover every request
    that ended (timeouts at their timeout), not cancelled or cut ones.
    """

    name: str
    kind: str = "tool_conversation"
    outcome: str = "ok"  # ok | failed | cancelled | host_froze
    started_at: float | None = None
    ended_at: float | None = None
    requests: int = 0
    errors: int = 0
    timeouts: int = 0
    cut_by_freeze: int = 0
    conversations: int = 0
    latency_median_s: float | None = None
    latency_p95_s: float | None = None
    latency_max_s: float | None = None
    over_30s: int = 0
    max_prompt_tokens: int | None = None
    malformed_tool_calls: int = 0
    sessions: int = 0
    stop_reasons: dict[str, str] = field(default_factory=dict)
    jsonl_path: str | None = None

    def figures(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (no interpolation: a reported p95 is a latency that happened)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
