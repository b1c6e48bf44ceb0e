"""A vLLM stand-in for tests and demos: vLLM's HTTP API (as far as freezewatch uses it) and a
vLLM-format startup log that depends on the arguments. Production code never imports this.

    python -m tests.support.vllm_standin --port 8000 [--model M] [--max-model-len N]
        [--speculative-config JSON] [--gpu-memory-utilization F] [--kmsg-file PATH]
        [--log-file PATH] [--load-seconds F] [--malformed-tool-calls-above TOKENS]
        [--hang-after-requests N] [--stats-interval S] [--enable-auto-tool-choice]
        [--tool-call-parser P] [--disable-log-stats] [--data-parallel-size N]
        [--tensor-parallel-size N] [--pipeline-parallel-size N] [--dtype D] [--quantization Q]
        [--kv-cache-dtype D] [--enforce-eager]   (stated in its log, not acted on)
        (other vLLM args accepted, ignored)

Formats follow vLLM 0.33.0 (see /work/shared/reference/vllm-and-nvidia-formats.md). With
--speculative-config it loads a drafter, prints a NEGATIVE CUDA-graph estimate (as observed on
GB10) and, with --kmsg-file, appends the driver's NV_ERR_NO_MEMORY kmsg record at that moment.

Where freezewatch depends on it, it behaves as vLLM does: the port refuses connections until
the model is loaded (no 503); the stats line goes quiet after an interval without throughput
(vLLM logs it at DEBUG then); a tool call the parser cannot read comes back as plain content
with no ``tool_calls`` (and an ERROR line); ``tool_choice: "auto"`` (the default when tools are
sent) is a 400 without ``--enable-auto-tool-choice --tool-call-parser``; ``--disable-log-stats``
leaves no ``vllm:*`` metric; data-parallel engines have one metric series each, whole requests
and tokens per engine, in the text format 0.0.4 layout real vLLM 0.10.0 serves (counters typed
with their ``_total``, ``_created`` samples as a gauge of their own; see
tests/fixtures/real/vllm-metrics/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

VERSION = "0.33.0"
GPU_TOTAL_GIB = 121.69
# `--dtype` as vLLM resolves it (auto: the checkpoint's own, bfloat16 here).
DTYPE_NAMES = {"auto": "bfloat16", "half": "float16", "float": "float32"}
BYTES_PER_KV_TOKEN = 12_437  # ≈ the observed 66.58 GiB → 5,747,892 tokens on GB10
NV_ERR_RECORD = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)
_KMSG_SEQ = re.compile(r"^\d+,(\d+),")
# What /metrics still has with --disable-log-stats: the process collector, no vllm:* series.
PROCESS_METRICS = (
    "# HELP python_gc_objects_collected_total Objects collected during gc\n"
    "# TYPE python_gc_objects_collected_total counter\n"
    'python_gc_objects_collected_total{generation="0"} 4231.0\n'
    "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
    "# TYPE process_resident_memory_bytes gauge\n"
    "process_resident_memory_bytes 1.9876224e+09\n"
)
AUTO_TOOL_CHOICE = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


def _split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` engines as whole numbers (a gauge of requests is never
    fractional per engine)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _per_position(accepted: int, positions: int) -> list[int]:
    """``accepted`` tokens over the draft positions, fewer at each later one (as drafts
    are accepted left to right), summing to ``accepted``."""
    weights = [positions - i for i in range(positions)]
    shares = [accepted * w // sum(weights) for w in weights]
    shares[0] += accepted - sum(shares)
    return shares


def human_readable_int(text: str) -> int:
    """vLLM's integer args: "32k" is 32,000, "32K" 32,768 (vllm's arg_utils)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT])", text.strip())
    if not m:
        return int(text)
    number, suffix = m.groups()
    if suffix.islower():
        return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
    return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """vLLM-like arguments; unknown ones are accepted and ignored, as the stand-in needs few."""
    p = argparse.ArgumentParser(prog="vllm_standin")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--model", default="nvidia/Qwen3.6-35B-A3B-NVFP4")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--max-model-len", type=human_readable_int, default=262144)
    p.add_argument("--speculative-config", "-sc", default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.7)
    p.add_argument("--max-num-seqs", type=int, default=4)
    p.add_argument("--kmsg-file", default=None)
    p.add_argument("--log-file", default=None)
    p.add_argument("--load-seconds", type=float, default=2.0)
    p.add_argument("--malformed-tool-calls-above", type=int, default=None)
    p.add_argument("--hang-after-requests", type=int, default=None)
    p.add_argument("--stats-interval", type=float, default=10.0)
    p.add_argument("--request-seconds", type=float, default=0.02)
    p.add_argument("--enable-auto-tool-choice", action="store_true")
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    # The serving configuration: only stated in the log, as vLLM states it.
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--quantization", "-q", default=None)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--enforce-eager", action="store_true")
    args, _unknown = p.parse_known_args(argv)
    args.spec = json.loads(args.speculative_config) if args.speculative_config else None
    return args


class Logger:
    """Writes vLLM-format lines: `(<Proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:NNN] msg`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.api_pid = os.getpid()
        self.engine_pid = os.getpid() + 1

    def log(self, proc: str, src: str, msg: str, level: str = "INFO") -> None:
        pid = self.api_pid if proc == "APIServer" else self.engine_pid
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.raw(f"({proc} pid={pid}) {level} {stamp} [{src}] {msg}")

    def uvicorn(self, msg: str) -> None:
        self.raw(f"(APIServer pid={self.api_pid}) INFO:     {msg}")

    def raw(self, line: str) -> None:
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def append_kmsg_record(path: str, text: str = NV_ERR_RECORD, level: int = 3) -> str:
    """Append one real-format /dev/kmsg record (`3,<seq>,<usec>,-;text`); return it."""
    seq = 1000
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _KMSG_SEQ.match(line)
                if m:
                    seq = max(seq, int(m.group(1)) + 1)
    except FileNotFoundError:
        pass
    record = f"{level},{seq},{int(time.monotonic() * 1e6)},-;{text}"
    with open(path, "a", encoding="utf-8") as f:
        f.write(record + "\n")
        f.flush()
    return record


def non_default_args(a: argparse.Namespace) -> dict[str, Any]:
    """The ``non-default args: {...}`` dict of vLLM 0.8+ (only what differs from vLLM's
    defaults; the stand-in's own memory share and length are always given)."""
    out: dict[str, Any] = {"model": a.model, "max_model_len": a.max_model_len}
    out["gpu_memory_utilization"] = a.gpu_memory_utilization
    for name, default in (
        ("tensor_parallel_size", 1),
        ("pipeline_parallel_size", 1),
        ("data_parallel_size", 1),
        ("dtype", "auto"),
        ("quantization", None),
        ("kv_cache_dtype", "auto"),
        ("enforce_eager", False),
    ):
        if getattr(a, name) != default:
            out[name] = getattr(a, name)
    if a.spec:
        out["speculative_config"] = a.spec
    return out


def engine_config(a: argparse.Namespace) -> str:
    """The engine's resolved config, in the field order and spelling of vLLM 0.10.0's
    ``Initializing a V1 LLM engine (v0.10.0) with config:`` line (copied from
    tests/fixtures/real/vllm/v0.10.0-ascend-2416-v1-engine-config.log, shortened after
    ``device_config``): ``dtype`` resolved from ``auto`` to the checkpoint's bfloat16,
    ``max_model_len`` printed as ``max_seq_len``, ``kv_cache_dtype`` as asked."""
    dtype = DTYPE_NAMES.get(a.dtype, a.dtype)
    return (
        f"model='{a.model}', speculative_config={a.spec!r}, tokenizer='{a.model}', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
        "override_neuron_config={}, tokenizer_revision=None, trust_remote_code=False, "
        f"dtype=torch.{dtype}, max_seq_len={a.max_model_len}, download_dir=None, "
        f"load_format=LoadFormat.AUTO, tensor_parallel_size={a.tensor_parallel_size}, "
        f"pipeline_parallel_size={a.pipeline_parallel_size}, disable_custom_all_reduce=False, "
        f"quantization={a.quantization}, enforce_eager={a.enforce_eager}, "
        f"kv_cache_dtype={a.kv_cache_dtype},  device_config=cuda, seed=0, "
        f"served_model_name={a.served_model_name or a.model}"
    )


class Engine:
    """The stand-in's state: readiness, counters, and the startup memory plan."""

    def __init__(self, args: argparse.Namespace, logger: Logger) -> None:
        self.args = args
        self.log = logger
        self.name = args.served_model_name or args.model
        self.ready = False
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.spec_draft = 0
        self.spec_accepted = 0
        self.spec_drafts = 0
        k = int((args.spec or {}).get("num_speculative_tokens") or 1)
        self.spec_per_pos = [0] * k
        self.kv_tokens = 1
        self.created = int(time.time())
        self.last_prompt = 0
        self.last_generation = 0

    # -- startup ---------------------------------------------------------------------------
    def startup(self) -> bool:
        """Print the startup log over --load-seconds; False if the plan cannot fit."""
        a, lg, t = self.args, self.log, self.args.load_seconds
        spec = a.spec
        lg.log(
            "APIServer", "utils.py:290", f"vLLM server version {VERSION}, serving model {a.model}"
        )
        lg.log("APIServer", "utils.py:240", f"non-default args: {non_default_args(a)!r}")
        lg.log(
            "EngineCore",
            "core.py:110",
            f"Initializing a V1 LLM engine (v{VERSION}) with config: {engine_config(a)}",
        )
        lg.log("EngineCore", "gpu_model_runner.py:4700", f"Starting to load model {a.model}...")
        started = time.monotonic()
        self._sleep(0.4 * t)
        lg.log("EngineCore", "default_loader.py:390", f"Loading weights took {0.4 * t:.2f} seconds")
        model_gib = 21.9
        if spec:
            self._sleep(0.05 * t)  # real vLLM spends a moment between the two loads
            lg.log("EngineCore", "gpu_model_runner.py:4801", "Loading drafter model...")
            if a.kmsg_file:
                append_kmsg_record(a.kmsg_file)
            self._sleep(0.15 * t)
            lg.log(
                "EngineCore",
                "default_loader.py:390",
                f"Loading weights took {0.15 * t:.2f} seconds",
            )
            model_gib = 23.43
        took = time.monotonic() - started
        lg.log(
            "EngineCore",
            "gpu_model_runner.py:4879",
            f"Model loading took {model_gib} GiB memory and {took:.6f} seconds",
        )
        self._sleep(0.15 * t)
        estimate = -0.9 if spec else 0.62
        lg.log(
            "EngineCore",
            "gpu_model_runner.py:5963",
            "Profiling CUDA graph memory: PIECEWISE=51 (largest=512)",
        )
        lg.log(
            "EngineCore",
            "gpu_model_runner.py:6042",
            f"Estimated CUDA graph memory: {estimate:.2f} GiB total",
        )
        kv_gib = round(
            a.gpu_memory_utilization * GPU_TOTAL_GIB - model_gib - 2.5 - max(estimate, 0), 2
        )
        lg.log("EngineCore", "gpu_worker.py:440", f"Available KV cache memory: {kv_gib} GiB")
        if kv_gib <= 0:
            lg.log(
                "EngineCore",
                "core.py:1010",
                "ValueError: No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine.",
                level="ERROR",
            )
            lg.log("EngineCore", "core.py:1010", "EngineCore failed to start.", level="ERROR")
            lg.raw(
                f"(APIServer pid={lg.api_pid}) RuntimeError: Engine core initialization failed. "
                "See root cause above. Failed core proc(s): {'EngineCore': 1}"
            )
            return False
        self.kv_tokens = int(kv_gib * 2**30 / BYTES_PER_KV_TOKEN)
        concurrency = self.kv_tokens / a.max_model_len
        lg.log(
            "EngineCore",
            "kv_cache_utils.py:1730",
            f"GPU KV cache size: {self.kv_tokens:,} tokens, Maximum concurrency for "
            f"{a.max_model_len:,} tokens per request: {concurrency:.2f}x",
        )
        self._sleep(0.2 * t)
        lg.log(
            "EngineCore",
            "gpu_model_runner.py:6133",
            "Graph capturing finished in 1 secs, took 0.58 GiB",
        )
        if estimate > 0:  # vLLM prints the comparison only for a positive estimate
            diff = 0.58 - estimate
            lg.log(
                "EngineCore",
                "gpu_worker.py:530",
                f"CUDA graph pool memory: 0.58 GiB (actual), {estimate} GiB (estimated), "
                f"difference: {round(diff, 2)} GiB ({100 * diff / estimate:.1f}%).",
            )
        lg.log(
            "EngineCore",
            "core.py:299",
            f"init engine (profile, create kv cache, warmup model) took {0.5 * t:.2f} s "
            f"(compilation: {0.2 * t:.2f} s)",
        )
        lg.log(
            "APIServer", "api_server.py:2000", f"Starting vLLM server on http://{a.host}:{a.port}"
        )
        lg.log("APIServer", "launcher.py:37", "Available routes are:")
        for route, methods in (
            ("/health", "GET"),
            ("/metrics", "GET"),
            ("/v1/models", "GET"),
            ("/v1/chat/completions", "POST"),
        ):
            lg.log("APIServer", "launcher.py:45", f"Route: {route}, Methods: {methods}")
        lg.uvicorn(f"Started server process [{lg.api_pid}]")
        lg.uvicorn("Waiting for application startup.")
        lg.uvicorn("Application startup complete.")
        self.ready = True
        return True

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)

    # -- periodic stats --------------------------------------------------------------------
    def stats_loop(self) -> None:
        """Every --stats-interval: vLLM's `Engine 000: ...` line (and SpecDecoding metrics),
        at INFO unless this interval and the one before had no throughput (then DEBUG, which
        the default log level does not print: an idle or hung engine goes quiet)."""
        interval = self.args.stats_interval
        idle_before = True  # vLLM starts from zero throughput: quiet until the first request
        while not self.stop.wait(interval):
            with self.lock:
                prompt = self.prompt_tokens - self.last_prompt
                gen = self.generation_tokens - self.last_generation
                self.last_prompt, self.last_generation = self.prompt_tokens, self.generation_tokens
                running = self.running
                usage = 100.0 * min(1.0, running * 4096 / max(self.kv_tokens, 1))
            idle = prompt == 0 and gen == 0
            quiet, idle_before = idle and idle_before, idle
            if quiet or self.args.disable_log_stats:
                continue
            self.log.log(
                "APIServer",
                "loggers.py:257",
                f"Engine 000: Avg prompt throughput: {prompt / interval:.1f} tokens/s, "
                f"Avg generation throughput: {gen / interval:.1f} tokens/s, "
                f"Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: {usage:.1f}%, "
                "Prefix cache hit rate: 0.0%",
            )
            if self.args.spec:
                self.log.log(
                    "APIServer",
                    "metrics.py:100",
                    "SpecDecoding metrics: Mean acceptance length: 2.44, Accepted throughput: "
                    f"{gen * 0.58 / interval:.2f} tokens/s, Drafted throughput: "
                    f"{gen * 0.8 / interval:.2f} tokens/s, Accepted: {int(gen * 0.58)} tokens, "
                    f"Drafted: {int(gen * 0.8)} tokens, Per-position acceptance rate: 0.810, "
                    "0.633, Avg Draft acceptance rate: 72.2%",
                )

    # -- HTTP ------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        """/metrics in vLLM's Prometheus text format: one series per data-parallel engine,
        none at all with --disable-log-stats."""
        if self.args.disable_log_stats:
            return PROCESS_METRICS
        engines = max(1, self.args.data_parallel_size)
        with self.lock:
            usage = min(1.0, self.running * 4096 / max(self.kv_tokens, 1))
            rows = [
                (
                    "vllm:num_requests_running",
                    "gauge",
                    "Number of requests in model execution batches.",
                    self.running,
                ),
                (
                    "vllm:num_requests_waiting",
                    "gauge",
                    "Number of requests waiting to be processed.",
                    0,
                ),
                (
                    "vllm:kv_cache_usage_perc",
                    "gauge",
                    "KV-cache usage. 1 means 100 percent usage.",
                    usage,
                ),
                (
                    "vllm:num_preemptions_total",
                    "counter",
                    "Cumulative number of preemption from the engine.",
                    0,
                ),
                (
                    "vllm:prompt_tokens_total",
                    "counter",
                    "Number of prefill tokens processed.",
                    self.prompt_tokens,
                ),
                (
                    "vllm:generation_tokens_total",
                    "counter",
                    "Number of generation tokens processed.",
                    self.generation_tokens,
                ),
            ]
            if self.args.spec:
                rows += [
                    (
                        "vllm:spec_decode_num_drafts_total",
                        "counter",
                        "Number of spec decoding drafts.",
                        self.spec_drafts,
                    ),
                    (
                        "vllm:spec_decode_num_draft_tokens_total",
                        "counter",
                        "Number of draft tokens.",
                        self.spec_draft,
                    ),
                    (
                        "vllm:spec_decode_num_accepted_tokens_total",
                        "counter",
                        "Number of accepted tokens.",
                        self.spec_accepted,
                    ),
                ]
        # prometheus_client's text format 0.0.4, as vLLM 0.10.0 serves it (production-stack
        # issue 617): HELP/TYPE name a counter with its _total; its _created samples follow as
        # their own gauge. Each engine reports whole requests and tokens, its own KV usage.
        out = []
        for name, kind, help_text, value in rows:
            per_engine = [
                float(value) if name == "vllm:kv_cache_usage_perc" else float(part)
                for part in _split(int(value), engines)
            ]
            labels = [f'{{engine="{e}",model_name="{self.name}"}}' for e in range(engines)]
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out += [f"{name}{lbl} {share}" for lbl, share in zip(labels, per_engine, strict=True)]
            if kind == "counter":
                created = name[: -len("_total")] + "_created"
                out.append(f"# HELP {created} {help_text}")
                out.append(f"# TYPE {created} gauge")
                out += [f"{created}{lbl} {float(self.created)}" for lbl in labels]
        if self.args.spec:
            out += self._per_position_text(engines)
        return "\n".join(out) + "\n"

    def _per_position_text(self, engines: int) -> list[str]:
        """vLLM's accepted tokens per draft position (``SpecDecodingProm``): the engine's
        labels and then ``position``, one series per position of each engine."""
        name, help_text = (
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
        )
        out = []
        for suffix, kind in (("_total", "counter"), ("_created", "gauge")):
            out += [f"# HELP {name}{suffix} {help_text}", f"# TYPE {name}{suffix} {kind}"]
            shares = [_split(accepted, engines) for accepted in self.spec_per_pos]
            for engine in range(engines):  # the order vLLM creates them: by engine, then position
                for position, per_engine in enumerate(shares):
                    value = per_engine[engine] if suffix == "_total" else self.created
                    labels = f'engine="{engine}",model_name="{self.name}",position="{position}"'
                    out.append(f"{name}{suffix}{{{labels}}} {float(value)}")
        return out

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "vllm",
                    "root": self.args.model,
                    "parent": None,
                    "max_model_len": self.args.max_model_len,
                    "permission": [
                        {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission"}
                    ],
                }
            ],
        }

    def tool_choice_error(self, body: dict[str, Any]) -> str | None:
        """vLLM's 400 for an "auto" tool choice the server was not started for, else None."""
        choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
        if choice == "auto" and not (
            self.args.enable_auto_tool_choice and self.args.tool_call_parser
        ):
            return AUTO_TOOL_CHOICE
        return None

    def chat(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """One chat completion; None when the engine is hung (the caller then waits forever)."""
        messages = body.get("messages") or []
        tools = body.get("tools") or [] if body.get("tool_choice") != "none" else []
        prompt_tokens = max(1, len(json.dumps(messages, ensure_ascii=False)) // 4)
        with self.lock:
            self.requests += 1
            number = self.requests
            self.running += 1
        hang = self.args.hang_after_requests
        if hang is not None and number > hang:
            return None  # stays running; counters frozen, /health still 200 (vLLM's real hang)
        self.stop.wait(self.args.request_seconds)
        completion_tokens = 24
        with self.lock:
            self.running -= 1
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += completion_tokens
            if self.args.spec:
                self.spec_draft += 18
                self.spec_accepted += 13
                self.spec_drafts += 18 // len(self.spec_per_pos)
                for position, accepted in enumerate(_per_position(13, len(self.spec_per_pos))):
                    self.spec_per_pos[position] += accepted
        message: dict[str, Any] = {"role": "assistant", "content": None, "reasoning": None}
        finish = "stop"
        if tools:
            tool = tools[(len(messages) // 2) % len(tools)].get("function", {})
            name = tool.get("name", "tool")
            arguments = json.dumps(_arguments_for(tool.get("parameters") or {}, len(messages)))
            above = self.args.malformed_tool_calls_above
            if above is not None and prompt_tokens > above and (len(messages) // 2) % 2 == 0:
                # The model's call is cut short: the parser cannot read it, and vLLM hands the
                # raw text back as content, with no tool call.
                cut = arguments[: max(1, len(arguments) // 2)]
                message["content"] = f'<tool_call>\n{{"name": "{name}", "arguments": {cut}'
                self.log.log(
                    "APIServer",
                    "hermes_tool_parser.py:120",
                    "Error in extracting tool call from response.",
                    level="ERROR",
                )
            else:
                message["tool_calls"] = [
                    {
                        "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
                finish = "tool_calls"
        else:
            message["content"] = "OK."  # 0.33 omits an empty tool_calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens,
                "prompt_tokens_details": None,
            },
        }


def _arguments_for(schema: dict[str, Any], n: int) -> dict[str, Any]:
    samples = {
        "string": f"value-{n}",
        "integer": n,
        "number": n + 0.5,
        "boolean": True,
        "array": [],
        "object": {},
    }
    props = schema.get("properties") or {}
    return {name: samples.get(str(spec.get("type")), f"value-{n}") for name, spec in props.items()}


def _bad_request(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def make_handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to one engine."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # uvicorn-style access log
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            reason = self.responses.get(status, ("",))[0]
            engine.log.uvicorn(
                f'{self.client_address[0]}:{self.client_address[1]} - "{self.command} {self.path} '
                f'HTTP/1.1" {status} {reason}'
            )

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj).encode())

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/health":
                self._send(200, b"")  # nothing answers before the model is loaded
            elif path == "/metrics":
                self._send(
                    200, engine.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8"
                )
            elif path == "/v1/models":
                self._json(200, engine.models())
            elif path == "/version":
                self._json(200, {"version": VERSION})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.split("?")[0] != "/v1/chat/completions":
                self._json(404, {"detail": "Not Found"})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, _bad_request("invalid JSON"))
                return
            refused = engine.tool_choice_error(body)
            if refused is not None:
                self._json(400, _bad_request(refused))
                return
            result = engine.chat(body)
            if result is None:
                engine.stop.wait()  # hung engine: the request never finishes
                return
            self._json(200, result)

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in until SIGTERM/SIGINT."""
    args = parse_args(argv)
    # Held open for the process lifetime, like vLLM's own stdout.
    stream: TextIO = (
        open(args.log_file, "a", encoding="utf-8")  # noqa: SIM115
        if args.log_file
        else sys.stdout
    )
    logger = Logger(stream)
    engine = Engine(args, logger)
    # The port is taken at once but listens only once the model is loaded: until then a client
    # is refused, as by vLLM (whose API server starts listening after the engine is up).
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine), False)
    server.server_bind()
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: engine.stop.set())
    signal.signal(signal.SIGINT, lambda *_: engine.stop.set())
    code = 0
    if engine.startup():
        server.server_activate()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        threading.Thread(target=engine.stats_loop, daemon=True).start()
    elif not engine.stop.is_set():
        code = 1
        engine.stop.set()
    while not engine.stop.wait(0.2):
        pass
    if engine.ready:
        logger.uvicorn("Shutting down")
        logger.uvicorn("Waiting for application shutdown.")
        logger.uvicorn("Application shutdown complete.")
        logger.uvicorn(f"Finished server process [{logger.api_pid}]")
    if engine.ready:
        server.shutdown()
    server.server_close()
    return code


if __name__ == "__main__":
    sys.exit(main())
