"""The serving configuration a start's own lines state, for comparing configurations.

vLLM prints it three ways: V0's ``args: Namespace(name=value, ...)`` (0.5-0.8), the
``non-default args: {'name': value, ...}`` dict (0.8+), and the engine's resolved
``Initializing ... engine (v...) with config: name=value, ...`` line (``max_seq_len``,
``dtype=torch.bfloat16``); V1 also logs ``Using max model len N``. Later lines refine earlier
ones (the engine line resolves the args), and an unset value (``None``, ``auto``) says nothing
(a KV cache dtype's ``auto`` aside).
"""

from __future__ import annotations

import re
from typing import Any

# Plan field -> (the names vLLM prints it under, how to read the value).
CONFIG_FIELDS: dict[str, tuple[tuple[str, ...], type]] = {
    "tensor_parallel_size": (("tensor_parallel_size",), int),
    "pipeline_parallel_size": (("pipeline_parallel_size",), int),
    "data_parallel_size": (("data_parallel_size",), int),
    "max_model_len": (("max_model_len", "max_seq_len"), int),
    "gpu_memory_utilization": (("gpu_memory_utilization",), float),
    "dtype": (("dtype",), str),
    "quantization": (("quantization",), str),
    "kv_cache_dtype": (("kv_cache_dtype",), str),
    "enforce_eager": (("enforce_eager",), bool),
}
CONFIG_LINE = re.compile(
    r"args: Namespace\(|non-default args: \{|LLM engine \(v[^)]*\) with config: |"
    r"Using max model len \d"
)
MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
UNSET = frozenset(("None", "auto", ""))
# kv_cache_dtype's "auto" is a choice in itself (the KV cache in the model's or the checkpoint's
# dtype), stated alike by the args and the engine line and resolved by no later line: a start
# with it differs from one with fp8. A dtype's "auto" is unstated: the engine line resolves it.
AUTO_STATED = frozenset(("kv_cache_dtype",))
# vLLM's other spellings of a dtype: the args keep the user's ("half") until the engine line
# resolves it to torch's name, so a start that failed before that line would state "half".
DTYPE_ALIASES = {"half": "float16", "float": "float32"}


def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    # A name on its own (not the tail of another: "dtype" inside "kv_cache_dtype"), then
    # "=" or "': ", then the value, quoted or bare ("torch." in front of a dtype left out).
    alts = "|".join(names)
    return re.compile(
        rf"(?<![\w.])['\"]?(?:{alts})['\"]?(?:=|: )['\"]?(?:torch\.)?([\w.+-]*)['\"]?(?=[,)}}\s]|$)"
    )


PATTERNS = {name: _pattern(names) for name, (names, _kind) in CONFIG_FIELDS.items()}


def _read(text: str, kind: type) -> Any:
    if kind is bool:
        return {"True": True, "False": False}.get(text)
    try:
        return kind(text)
    except ValueError:
        return None


def _auto_stated(name: str, text: str) -> bool:
    return text == "auto" and name in AUTO_STATED


def config_fields(msg: str) -> dict[str, Any]:
    """The configuration fields a start line states (none for any other line)."""
    if not CONFIG_LINE.search(msg):
        return {}
    found: dict[str, Any] = {}
    m = MAX_MODEL_LEN.search(msg)
    if m:
        found["max_model_len"] = int(m.group(1))
    for name, pattern in PATTERNS.items():
        m = pattern.search(msg)
        if m is None or (m.group(1) in UNSET and not _auto_stated(name, m.group(1))):
            continue
        value = _read(m.group(1), CONFIG_FIELDS[name][1])
        if name == "dtype":
            value = DTYPE_ALIASES.get(value, value)
        if value is not None:
            found[name] = value
    return found
