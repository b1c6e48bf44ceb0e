"""The serving configuration a start's own lines state, for comparing configurations.

vLLM prints it three ways: V0's ``args: Namespace(name=value, ...)`` (0.5-0.8), the
``non-default args: {'name': value, ...}`` dict (0.8+), and the engine's resolved
``Initializing ... engine (v...) with config: name=value, ...`` line (``max_seq_len``,
``dtype=torch.bfloat16``, ``chunked_prefill_enabled``, ``speculative_config=SpeculativeConfig(
method=..., num_spec_tokens=N)``). A few settings have a line of their own: V1's ``Using max
model len N``, ``Chunked prefill is enabled with max_num_batched_tokens=N.``, and the attention
backend vLLM chose. Later lines refine earlier ones (the engine line resolves the args), and an
unset value (``None``, ``auto``) says nothing (a KV cache dtype's ``auto`` aside).
"""

from __future__ import annotations

import re
from typing import Any

from collector.vllm.log_formats import QUOTE

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
    "max_num_seqs": (("max_num_seqs",), int),
    "max_num_batched_tokens": (("max_num_batched_tokens",), int),
    "enable_chunked_prefill": (("enable_chunked_prefill", "chunked_prefill_enabled"), bool),
    "enable_prefix_caching": (("enable_prefix_caching",), bool),
    "attention_backend": (("attention_backend",), str),
    "speculative_method": (("method",), str),  # read inside the speculative config only
    "num_speculative_tokens": (("num_speculative_tokens", "num_spec_tokens"), int),
}
# 0.2-0.3 named no version: "Initializing an LLM engine with config: model=...".
ENGINE_CONFIG = re.compile(r"LLM engine (?:\(v[^)]*\) )?with config: ")
SETTINGS_LINE = re.compile(rf"args: Namespace\(|non-default args: \{{|{ENGINE_CONFIG.pattern}")
# A paste's wrap of the engine's long config line (or the args'): the next line goes on with no
# header of its own, the cut value's tail (or nothing), then the config's next ", name=" (the
# args' ", 'name': "; a tqdm bar, a warning or a traceback's indented frame never reads so).
WRAPPED_CONFIG = re.compile(r" ?[^\s,]*, (?:\w+=|'\w+': )")
MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
# The memory lines that restate --gpu-memory-utilization: V0's profile ("total_gpu_memory
# (79.19GiB) x gpu_memory_utilization (0.90)", "Memory profiling results: ...
# kv_cache_size=2.89GiB gpu_memory_utilization=0.90", the field it ends on; 0.6's one line puts
# a comma between and a full stop after: "kv_cache_size=34.78GiB, gpu_memory_utilization=0.90."),
# the CUDA graph profiling hint ("The current --gpu-memory-utilization=0.8500 is equivalent to
# ...", 0.18's "from 0.9000 to 0.9690"), the free-memory advice ("Desired GPU memory
# utilization is (0.95, 45.03 GiB)") and the startup free-memory check's error ("... is less
# than desired GPU memory utilization (0.9, 19.84 GiB)").
GPU_UTILIZATION = re.compile(
    r"x gpu_memory_utilization \((\d[\d.]*)\)|The current --gpu-memory-utilization=(\d[\d.]*)|"
    r"--gpu-memory-utilization from (\d[\d.]*) to|"
    r"[Dd]esired GPU memory utilization (?:is )?\((\d[\d.]*),|"
    r"kv_cache_size=\d[\d.]*GiB,? gpu_memory_utilization=(\d+(?:\.\d+)?)"
)
# --max-model-len auto (or -1, 0.2x): the KV cache sizing fits the length after the lines that
# state the model's full one ("Auto-fit max_model_len: reduced from 262144 to 172032 ...").
AUTO_FIT = re.compile(r"Auto-fit max_model_len: reduced from \d+ to (\d+)")
CHUNKED_PREFILL = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
# The backend names --attention-backend takes and vLLM prints since 0.11 ("Using FLASH_ATTN
# attention backend out of potential backends: [...]"), for the names it printed before
# ("Using Flash Attention backend on V1 engine.", V0's "Using XFormers backend."), so one
# backend reads the same from every version.
BACKEND_NAMES = {
    "Flash Attention": "FLASH_ATTN",
    "FlashInfer": "FLASHINFER",
    "FlexAttention": "FLEX_ATTENTION",
    "Triton": "TRITON_ATTN",
    "XFormers": "XFORMERS",
    "Torch SDPA": "TORCH_SDPA",
    "FlashMLA": "FLASHMLA",
    "Triton MLA": "TRITON_MLA",
    "Cutlass MLA": "CUTLASS_MLA",
    "Triton Attention": "TRITON_ATTN",  # ROCm's platform (0.9+), "... backend on V1 engine."
    "Rocm Attention": "ROCM_ATTN",
}
# 0.20+ also print the enum's own name ("Using AttentionBackendEnum.TRITON_ATTN backend.", not
# its vision encoder's "Using backend AttentionBackendEnum.FLASH_ATTN for vit attention"), and a
# model's config may force one before any selection (Gemma 4 on 0.20: "Forcing TRITON_ATTN
# backend to prevent mixed-backend numerical divergence.").
ATTENTION_BACKEND = re.compile(
    r"Using (\w+) attention backend out of potential backends|"
    r"Using AttentionBackendEnum\.(\w+) backend\.$|Forcing ([A-Z][A-Z\d_]*) backend\b|"
    rf"Using ({'|'.join(BACKEND_NAMES)}) backend(?:\.$|.* on V1 engine)"
)
# The speculative config's own fields (its "method" says nothing outside it): the args' dict,
# or the engine line's SpeculativeConfig(...).
SPECULATIVE = re.compile(rf"speculative_config(?:=SpeculativeConfig\(|{QUOTE}?: \{{)([^)}}]*)")
SCOPED = {"speculative_method": SPECULATIVE}
# A speculative config without a method leaves it to vLLM, which names it from the drafter's
# model (SpeculativeConfig.__post_init__: "eagle-", then "eagle3", then "dflash" in the name,
# any case; else it reads the drafter's own config, which the log does not show).
SPEC_MODEL = re.compile(rf"{QUOTE}model{QUOTE}: {QUOTE}([^'\"‘’“”]*)")
NAMED_METHODS = (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"))
# Any other field inside the speculative config (an 'attention_backend', a 'max_model_len' or a
# 'quantization' given to the drafter alone) is the drafter's: the server's are read without it.
SPEC_OWN = frozenset(("speculative_method", "num_speculative_tokens"))
# The first value stated wins: a forced --attention-backend is what the selection line then
# says (vLLM refuses to start otherwise), and a drafter's selection line, after the target
# model's, is not the one a configuration is compared by.
FIRST_STATED = frozenset(("attention_backend",))
# "-1" (0.2x's --max-model-len -1) asks vLLM to fit the length: it states none.
UNSET = frozenset(("None", "auto", "", "-1"))
# kv_cache_dtype's "auto" is a choice in itself (the KV cache in the model's or the checkpoint's
# dtype), stated alike by the args and the engine line and resolved by no later line: a start
# with it differs from one with fp8. A dtype's "auto" is unstated: the engine line resolves it.
AUTO_STATED = frozenset(("kv_cache_dtype",))
# vLLM's other spellings of a dtype: the args keep the user's ("half") until the engine line
# resolves it to torch's name, so a start that failed before that line would state "half".
DTYPE_ALIASES = {"half": "float16", "float": "float32"}


def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    # A name on its own (not the tail of another: "dtype" inside "kv_cache_dtype"), then
    # "=" or "': ", then the value, quoted (typographic quotes too) or bare ("torch." in front
    # of a dtype left out).
    alts = "|".join(names)
    q = QUOTE
    return re.compile(
        rf"(?<![\w.]){q}?(?:{alts}){q}?(?:=|: ){q}?(?:torch\.)?([\w.+-]*){q}?(?=[,)}}\s]|$)"
    )


PATTERNS = {name: _pattern(names) for name, (names, _kind) in CONFIG_FIELDS.items()}


def spelled(name: str, value: Any) -> Any:
    """A value in the one spelling the plan keeps: the args' (and a spec's) "half" is
    float16, their "flash_attn" the FLASH_ATTN the selection line names."""
    if name == "dtype":
        return DTYPE_ALIASES.get(value, value)
    return value.upper() if name == "attention_backend" else value


def _read(text: str, kind: type) -> Any:
    if kind is bool:
        return {"True": True, "False": False}.get(text)
    try:
        return kind(text)
    except ValueError:
        return None


def _auto_stated(name: str, text: str) -> bool:
    return text == "auto" and name in AUTO_STATED


def _settings(msg: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    outside = SPECULATIVE.sub("", msg, count=1)
    for name, pattern in PATTERNS.items():
        scope = SCOPED.get(name)
        where = msg if name in SPEC_OWN else outside
        if scope is not None:
            where = s.group(1) if (s := scope.search(msg)) else ""
        m = pattern.search(where)
        if m is None or (m.group(1) in UNSET and not _auto_stated(name, m.group(1))):
            continue
        value = _read(m.group(1), CONFIG_FIELDS[name][1])
        if value is not None:
            found[name] = spelled(name, value)
    if "speculative_method" not in found and (spec := SPECULATIVE.search(msg)):
        drafter = SPEC_MODEL.search(spec.group(1))
        named = drafter.group(1).lower() if drafter else ""
        method = next((method for part, method in NAMED_METHODS if part in named), None)
        if method is not None:
            found["speculative_method"] = method
    return found


def config_fields(msg: str) -> dict[str, Any]:
    """The configuration fields a start line states (none for any other line)."""
    found = _settings(msg) if SETTINGS_LINE.search(msg) else {}
    if m := MAX_MODEL_LEN.search(msg) or AUTO_FIT.search(msg):
        found["max_model_len"] = int(m.group(1))
    if m := GPU_UTILIZATION.search(msg):
        found["gpu_memory_utilization"] = float(next(g for g in m.groups() if g is not None))
    if m := CHUNKED_PREFILL.search(msg):
        found.update(enable_chunked_prefill=True, max_num_batched_tokens=int(m.group(1)))
    if m := ATTENTION_BACKEND.search(msg):
        found["attention_backend"] = m.group(1) or m.group(2) or m.group(3) or BACKEND_NAMES[m[4]]
    return found
