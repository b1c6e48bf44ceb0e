"""What a profile asked vLLM for (its server args) next to what vLLM's log says it ran with.

A matrix compares configurations, so it compares what actually ran: a wrapper script or an
image's entrypoint that appends its own flags (argparse keeps the last), or vLLM resolving a
setting (``--quantization awq`` served as ``awq_marlin``), changes a setting between the spec
and the engine, and only the server's own start lines say so. A difference is flagged; an ask
of ``auto`` (or none) leaves the choice to vLLM and is never one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from collector.matrix.flags import item_key, split_args
from collector.vllm.log_config import CONFIG_FIELDS, spelled

# The plan fields of the serving configuration, in the order reports show them.
CONFIG_KEYS = tuple(CONFIG_FIELDS)
# Plan field -> the vLLM flags that set it (normalised by flags.flag_key).
FLAGS: dict[str, tuple[str, ...]] = {
    "tensor_parallel_size": ("--tensor-parallel-size", "-tp"),
    "pipeline_parallel_size": ("--pipeline-parallel-size", "-pp"),
    "data_parallel_size": ("--data-parallel-size", "-dp"),
    "max_model_len": ("--max-model-len",),
    "gpu_memory_utilization": ("--gpu-memory-utilization",),
    "dtype": ("--dtype",),
    "quantization": ("--quantization", "-q"),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "enforce_eager": ("--enforce-eager",),
    "max_num_seqs": ("--max-num-seqs",),
    "max_num_batched_tokens": ("--max-num-batched-tokens",),
    "enable_chunked_prefill": ("--enable-chunked-prefill",),
    "enable_prefix_caching": ("--enable-prefix-caching",),
    "attention_backend": ("--attention-backend",),
}
# One JSON flag sets the speculative fields: plan field -> its key in that JSON.
SPECULATIVE_FLAGS = ("--speculative-config", "-sc")
SPECULATIVE_KEYS = {
    "speculative_method": "method",
    "num_speculative_tokens": "num_speculative_tokens",
}
# How reports head each field.
LABELS = {
    "tensor_parallel_size": "TP",
    "pipeline_parallel_size": "PP",
    "data_parallel_size": "DP",
    "max_model_len": "Max model len",
    "gpu_memory_utilization": "GPU memory util.",
    "dtype": "dtype",
    "quantization": "Quantization",
    "kv_cache_dtype": "KV cache dtype",
    "enforce_eager": "Eager",
    "max_num_seqs": "Max seqs",
    "max_num_batched_tokens": "Max batched tokens",
    "enable_chunked_prefill": "Chunked prefill",
    "enable_prefix_caching": "Prefix caching",
    "attention_backend": "Attention backend",
    "speculative_method": "Speculative method",
    "num_speculative_tokens": "Speculative tokens",
}
BY_FLAG = {flag: name for name, flags in FLAGS.items() for flag in flags}
AUTO = "auto"
# vLLM's human-readable integers: "32k" is 32,000 and "32K" 32,768 (arg_utils).
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _integer(text: str) -> int | None:
    m = _HUMAN_INT.fullmatch(text.strip())
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return None if "." in number else int(number) * _BINARY[suffix]  # vLLM refuses 1.5K
    try:
        return int(text)
    except ValueError:
        return None


def _asked(name: str, text: str) -> Any:
    """The typed value an arg asks for; ``auto`` where it leaves the choice to vLLM (the
    text as given where it cannot be read)."""
    kind = CONFIG_FIELDS[name][1]
    if text.lower() == AUTO:
        return AUTO
    if kind is int:
        number = _integer(text)
        if number is None:
            return text
        return AUTO if name == "max_model_len" and number < 0 else number  # -1: fit to memory
    if kind is float:
        try:
            return float(text)
        except ValueError:
            return text
    return spelled(name, text)


def _speculative(text: str | None) -> dict[str, Any]:
    """The speculative fields a --speculative-config JSON asks for (none it cannot read)."""
    try:
        config = json.loads(text or "")
    except ValueError:
        return {}
    if not isinstance(config, dict):
        return {}
    return {
        name: _asked(name, str(config[key]))
        for name, key in SPECULATIVE_KEYS.items()
        if config.get(key) is not None
    }


def requested_config(args: Sequence[str]) -> dict[str, Any]:
    """The serving configuration a server argv asks for: plan field -> value (the last
    occurrence wins, as in vLLM's argparse); fields it does not set are left out."""
    found: dict[str, Any] = {}
    for item in split_args(args)[1]:
        key = item_key(item) or ""
        text = item[0].split("=", 1)[1] if "=" in item[0] else item[1] if len(item) > 1 else None
        if key in SPECULATIVE_FLAGS:
            for field in SPECULATIVE_KEYS:
                found.pop(field, None)  # a later config replaces the whole of an earlier one
            found.update(_speculative(text))
            continue
        negated = key.startswith("--no-")
        name = BY_FLAG.get("--" + key.removeprefix("--no-") if negated else key)
        if name is None:
            continue
        # A switch: --flag, --no-flag, or (older vLLM) "--enable-chunked-prefill False".
        if CONFIG_FIELDS[name][1] is bool:
            found[name] = not negated and (text or "true").lower() != "false"
        elif text is not None:
            found[name] = _asked(name, text)
    return found


def _differs(asked: Any, reported: Any) -> bool:
    if isinstance(asked, bool) or isinstance(reported, bool):
        return asked is not reported
    if isinstance(asked, int | float) and isinstance(reported, int | float):
        return not math.isclose(asked, reported, rel_tol=1e-9, abs_tol=1e-9)
    return str(asked).lower() != str(reported).lower()


def config_mismatch(requested: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """Fields where vLLM's log states another value than the spec asked for: field ->
    {"requested", "reported"}. A field the log does not state, or an ``auto`` ask, is none."""
    out = {}
    for name, asked in requested.items():
        reported = plan.get(name)
        if reported is None or asked == AUTO or not _differs(asked, reported):
            continue
        out[name] = {"requested": asked, "reported": reported}
    return out


def shown_keys(profiles: Sequence[Any]) -> list[str]:
    """The fields a comparison shows: those any profile's log states or its args ask for (as
    the campaign table shows only the kernel event kinds that happened)."""
    return [
        key
        for key in CONFIG_KEYS
        if any(p.startup_plan.get(key) is not None or key in p.requested for p in profiles)
    ]
