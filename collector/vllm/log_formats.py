"""vLLM's log lines as it has printed them across versions (0.10 → 0.33), as patterns.

An optional ``(<Proc> pid=N) `` tag, ``LEVEL MM-DD HH:MM:SS [file.py:NNN] message``, uvicorn's
``INFO:     ...`` lines, ANSI colours, and message formats that changed between releases.
Messages are matched by content, never by vLLM's source line numbers.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HEADER = re.compile(
    r"(?:\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"(?P<date>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+\[(?P<src>[^\]]+)\]\s?(?P<msg>.*)$"
)
TAG_ONLY = re.compile(r"\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\)\s?(?P<msg>.*)$")
FLOAT = r"(-?\d+(?:\.\d+)?)"

VERSION = re.compile(
    r"vLLM (?:server|API server) version (?P<v>[\w.+-]+)|"
    r"Initializing a V1 LLM engine \(v(?P<v2>[\w.+-]+)\)"
)
START_MARK = re.compile(
    r"vLLM (?:server|API server) version |non-default args: |Initializing a V1 LLM engine"
)
LOAD_START = re.compile(
    r"Starting to load model|Loading safetensors checkpoint shards|Loading weights took"
)
DRAFTER = re.compile(r"Loading drafter model")
MODEL_LOAD = re.compile(rf"Model loading took {FLOAT} GiB(?: memory)? and {FLOAT} seconds")
PROFILING = re.compile(
    r"Profiling CUDA graph memory|Estimated CUDA graph memory|Available KV cache memory|"
    r"KV cache size: |Maximum concurrency for |Memory profiling takes"
)
CG_ESTIMATE = re.compile(rf"Estimated CUDA graph memory: {FLOAT} GiB")
KV_GIB = re.compile(rf"Available KV cache memory: {FLOAT} GiB")
KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
MAX_CONC = re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: {FLOAT}x")
CAPTURE = re.compile(r"Capturing CUDA graph|Graph capturing finished")
CAPTURE_DONE = re.compile(rf"Graph capturing finished in {FLOAT} secs?, took {FLOAT} GiB")
POOL = re.compile(rf"CUDA graph pool memory: {FLOAT} GiB \(actual\), {FLOAT} GiB \(estimated\)")
INIT_ENGINE = re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {FLOAT}")
SERVING = re.compile(r"Starting vLLM (?:API )?server")
READY = re.compile(r"Application startup complete")
STOPPED = re.compile(
    r"INFO:\s+Shutting down$|Application shutdown complete|Finished server process"
)
# Root causes (specific) beat the generic "engine failed" lines for `error`.
ROOT_CAUSE = re.compile(
    r"on startup is less than desired GPU memory utilization|"
    r"No available memory for the cache blocks|"
    r"To serve at least one request with the model's max seq len|"
    r"Failed to load model - not enough GPU memory|"
    r"User-specified max_model_len \(\d+\) is greater than|"
    r"CUDA out of memory|OutOfMemoryError"
)
GENERIC_FAIL = re.compile(
    r"EngineCore failed to start|EngineCore encountered a fatal error|"
    r"Engine core initialization failed|EngineDeadError"
)
STATS = re.compile(
    r"(?:Engine (?P<engine>\d+)|(?P<n>\d+) Engines Aggregated): Avg prompt throughput"
)
SPEC = re.compile(r"SpecDecoding metrics: ")
STAT_FIELDS = {
    "prompt_throughput": re.compile(rf"Avg prompt throughput: {FLOAT} tokens/s"),
    "generation_throughput": re.compile(rf"Avg generation throughput: {FLOAT} tokens/s"),
    "running": re.compile(r"Running: (\d+) reqs"),
    "waiting": re.compile(r"(?:Waiting|Pending): (\d+) reqs"),
    "deferred": re.compile(r"Deferred: (\d+) reqs"),
    "preemptions": re.compile(r"Preemptions: (\d+)"),
    "kv_cache_usage_pct": re.compile(rf"GPU KV cache usage: {FLOAT}%"),
    "prefix_cache_hit_rate_pct": re.compile(rf"Prefix cache hit rate: {FLOAT}%"),
}
SPEC_FIELDS = {
    "mean_acceptance_length": re.compile(rf"Mean acceptance length: {FLOAT}"),
    "accepted_throughput": re.compile(rf"Accepted throughput: {FLOAT} tokens/s"),
    "drafted_throughput": re.compile(rf"Drafted throughput: {FLOAT} tokens/s"),
    "accepted_tokens": re.compile(r"Accepted: (\d+) tokens"),
    "drafted_tokens": re.compile(r"Drafted: (\d+) tokens"),
    "acceptance_rate_pct": re.compile(rf"Avg Draft acceptance rate: {FLOAT}%"),
}
PER_POSITION = re.compile(r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?(?:, )?)+)")
INT_STATS = {"running", "waiting", "deferred", "preemptions", "accepted_tokens", "drafted_tokens"}
