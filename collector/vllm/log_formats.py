"""vLLM's log messages as it has printed them across versions (0.5 → 0.33), as patterns.

What a message is, once ``log_lines`` has split it from its line: vLLM's own, uvicorn's
``INFO:     ...`` lines, and message formats that changed between releases. Messages are matched
by content, never by source line numbers.
"""

from __future__ import annotations

import re

FLOAT = r"(-?\d+(?:\.\d+)?)"

VERSION = re.compile(
    r"vLLM (?:server|API server) version (?P<v>[\w.+-]+)|"
    r"Initializing an? (?:V[01] )?LLM engine \(v(?P<v2>[\w.+-]+)\)|"
    r"[█▄▀].*\bversion\s+(?P<v3>\d[\w.+-]*)"  # the ASCII logo of 0.15+
)
START_MARK = re.compile(
    r"vLLM (?:server|API server) version |non-default args: |"
    r"Initializing an? (?:V[01] )?LLM engine|[█▄▀].*\bversion\s+\d"
)
LOAD_START = re.compile(
    r"Starting to load model|Loading safetensors checkpoint shards|Loading weights took|"
    r"Loading model weights took"
)
# The weight-loading bar past its first shard: a load under way, whose line stderr may flush
# after its start already failed; a new start's bar begins at 0.
LOAD_UNDER_WAY = re.compile(r"checkpoint shards:\s+\d+% Completed \| [1-9]")
# The drafter, by its load line or by what it is: an MTP, EAGLE or Medusa architecture (a
# speculator checkpoint resolves its own: EagleLlama..., Eagle3Qwen..., ...CausalLMEagle3,
# V0's EAGLEModel), V0's spec-decode worker. A target model named Eagle (NVIDIA's
# Eagle2_5_VLForConditionalGeneration) is no drafter: its "Eagle" runs on into a version.
DRAFTER = re.compile(
    r"Loading drafter model|Detected MTP model|Configuring SpecDecodeWorker|"
    r"Resolved architecture: \w*(?:MTP|(?:Eagle|EAGLE)3?(?![a-z\d_])|Medusa)\w*"
)
DRAFTER_LOAD = re.compile(r"Loading drafter model")
# The quotes of a dict vLLM prints, also as a forum's editor turns them typographic.
QUOTE = "['\"‘’“”]"
# A speculative config in the engine's config line or the non-default args.
SPEC_CONFIG = re.compile(
    rf"speculative_config=SpeculativeConfig\(|{QUOTE}speculative_config{QUOTE}: (?:\{{|{QUOTE})"
)
# "GB" (0.5-0.8.2) and "GiB" both count bytes / 2**30: the figure is GiB either way.
MODEL_LOAD = re.compile(rf"Model loading took {FLOAT} Gi?B(?: memory)? and {FLOAT} seconds")
# Gaudi's HPU model runner says "took in total 32.48 GiB of device memory (...)" (vllm-fork#488).
MODEL_LOAD_V0 = re.compile(rf"Loading model weights took (?:in total )?{FLOAT} Gi?B")
# V1 compiles the model (torch.compile, 0.7+) inside its profile and warmup run; its total
# "torch.compile takes %.2f s in total" says "took" in later releases (0.19.2 does). The warmup
# after the KV cache is sized (kernel_warmup.py: FlashInfer's autotune, in FlashInfer's words
# too, and attention; the compile sizes') is printed only while a start warms up.
PROFILING = re.compile(
    r"Dynamo bytecode transform time|torch\.compile t(?:akes|ook) |Compiling a graph for |"
    r"Initial profiling/warmup run took|FlashInfer autotune|Warming up FlashInfer attention|"
    r"\[Autotuner\]: Autotuning process starts|Compile and warming up model for size|"
    r"Profiling CUDA graph memory|Estimated CUDA graph memory|Available KV cache memory|"
    r"KV cache size: |Maximum concurrency for |Memory profiling takes|# \w+ blocks: |"
    r"reserved for KV Cache is|Memory profiling results|GiB memory for KV Cache as specified|"
    r"GiB reserved for KV cache"
)
CG_ESTIMATE = re.compile(rf"Estimated CUDA graph memory: {FLOAT} GiB")
# --kv-cache-memory (0.11+) skips the profile: "reserved 4.00 GiB memory for KV Cache as
# specified by kv_cache_memory_bytes config". Gaudi's worker splits the usable memory: "...,
# 7.13 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 64.17 GiB reserved for KV cache".
KV_GIB = re.compile(
    rf"Available KV cache memory: {FLOAT} GiB|reserved for KV Cache is {FLOAT} ?GiB|"
    rf"kv_cache_size={FLOAT}GiB|reserved {FLOAT} GiB memory for KV Cache as specified|"
    rf"{FLOAT} GiB reserved for KV cache\b"
)
KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
# V0: "# GPU blocks: 4109, # CPU blocks: 512" ("# CUDA blocks", "# cuda blocks" later), the
# second count the swap space. Other devices name their own first: Gaudi's "# HPU blocks: 4107"
# ("# hpu blocks" through the vllm-hpu plugin), the CPU backend's "# CPU blocks: 7281, # CPU
# blocks: 0" ("# cpu blocks" later). The first count on the line is the device's.
KV_BLOCKS = re.compile(r"# (GPU|CUDA|cuda|gpu|HPU|hpu|CPU|cpu) blocks: ([\d,]+)")
# A hybrid (mamba + attention) model's "Setting attention block size to 544 tokens": the size.
BLOCK_SIZE = re.compile(
    r"""['"]?block_size['"]?[=:]\s*(\d+)|--block-size[= ](\d+)|attention block size to (\d+) """
)
DEFAULT_BLOCK_SIZE = 16
# A device's default where it is not 16: HabanaAI's fork and the vllm-hpu plugin default Gaudi's
# to 128 (the Gaudi logs bear it out: 64.17 GiB over 4107 blocks is 128 tokens of Llama-3.1-8B).
DEVICE_BLOCK_SIZE = {"hpu": 128}
MAX_CONC = re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: {FLOAT}x")
# V0 said "Capturing the model for CUDA graphs" (0.5-0.6.3), then "Capturing cudagraphs for
# decoding" (0.6.4-0.10).
CAPTURE = re.compile(
    r"Capturing CUDA graph|Capturing the model for CUDA graphs|Capturing cudagraphs for decoding|"
    r"Graph capturing finished"
)
CAPTURE_DONE = re.compile(rf"Graph capturing finished in {FLOAT} secs?(?:, took {FLOAT} GiB)?")
POOL = re.compile(rf"CUDA graph pool memory: {FLOAT} GiB \(actual\), {FLOAT} GiB \(estimated\)")
INIT_ENGINE = re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {FLOAT}")
# The plan figures a terminal's hard wrap may cut in two (dennislee22/vLLM-benchmarking's log).
WRAPPABLE = (MODEL_LOAD, KV_GIB, KV_TOKENS, MAX_CONC, CG_ESTIMATE, CAPTURE_DONE, POOL, INIT_ENGINE)
# Lines of a start past its beginning (its weights loaded or loading, its compile, profile,
# capture, drafter, init total): a capture that opens at one joined a start under way.
UNDER_WAY = (
    DRAFTER,
    MODEL_LOAD,
    MODEL_LOAD_V0,
    LOAD_UNDER_WAY,
    re.compile(r"Loading weights took"),
    PROFILING,
    CAPTURE,
    POOL,
    INIT_ENGINE,
)
SERVING = re.compile(r"Starting vLLM (?:API )?server|Uvicorn running on ")
# A request answered OK on the API: the server is serving whatever the captured log lacks
# before it (a router or gateway in front answers 200 only once a server does).
ANSWERED = re.compile(r'"(?:GET|POST) /v1/\S+ HTTP/1\.\d" 200\b')
# The server's own access log, whatever the status (a 400 for a bad request, a 500 for a
# request that raised): it serves once the start is complete. The API's routes, and the probes'
# (a router's or kubelet's ``/health``, ``/metrics``) answered OK: ``/health`` answers 503 once
# the engine is dead. Only from the server's stream: a router in the same capture answers 502
# or 503, and its own ``/health`` 200, while the engine still loads.
ANSWERED_HERE = re.compile(
    r'"(?:GET|POST) (?:/v1/\S+ HTTP/1\.\d" [1-5]\d\d'
    r'|/(?:health|metrics|ping|version) HTTP/1\.\d" 200)\b'
)
READY = re.compile(r"Application startup complete")
# uvicorn stopping; from 0.25 the API server's SIGINT/SIGTERM handler says so first (launcher.py
# logs "[shutdown] API server: shutdown triggered" only there), and its abort of the engine may
# raise EngineDeadError in the output handler before uvicorn's lines: that is teardown.
STOPPED = re.compile(
    r"INFO:\s+Shutting down$|Application shutdown complete|Finished server process|"
    r"\[shutdown\] API server: shutdown triggered"
)
# Root causes (specific) beat the generic "engine failed" lines for `error`. The KV-capacity
# error said "models's max seq len" from 0.7.3 to 0.21, "model's" after, and V0 had its own.
# Out of memory in the CUDA driver's wording ("CUDA error: out of memory", e.g. at CUDA graph
# capture) as well as PyTorch allocator's (on ROCm "HIP out of memory"); NCCL failing ("NCCL
# error: unhandled system error", pynccl's RuntimeError and torch's "NCCL error in:") while the
# workers set up their groups. A hybrid (Mamba/linear-attention) model's state pool too small
# for max_num_seqs (0.19 on: "max_num_seqs (1024) exceeds available Mamba cache blocks (635)",
# at CUDA graph capture, after the KV plan).
# A CUDA fault is a root cause too, and kills a serving engine: the CUDA runtime's error as
# PyTorch raises it ("RuntimeError: CUDA error: an illegal memory access was encountered",
# torch.AcceleratorError from 2.8, vLLM's "Worker failed with error 'CUDA error: ...", the
# NCCL watchdog's "terminated with exception: CUDA error: ..."), its cudaError* name ("Search
# for `cudaErrorIllegalAddress' in ..."), cuBLAS ("CUBLAS_STATUS_EXECUTION_FAILED when calling
# ..."), a Triton kernel's launch ("Triton Error [CUDA]: ..."), the driver API's wording, and on
# ROCm the HSA runtime's "Memory access fault by GPU node-1 (Agent handle: ...) on address ...
# Reason: ..." before it aborts the process (ROCm/ROCm#5724).
# With the Ray executor the raylet reports a worker process that died (a segfault, the OOM
# killer) before the engine's own failure line: that death is why.
CUDA_FAULT = (
    r"CUDA error: |\bcudaError[A-Z]\w+|\bCUBLAS_STATUS_[A-Z_]+|Triton Error \[CUDA\]: |"
    r"CUDA driver error: |Memory access fault by GPU node-\d+|"
    r"^Failed: Cuda error \S+:\d+ '"  # the CUDACHECK of custom_all_reduce.cuh (1Cat-vLLM#539)
)
CUDA_FAULT_RE = re.compile(CUDA_FAULT)
ROOT_CAUSE = re.compile(
    CUDA_FAULT + "|" + r"Free memory on device [^)]*\) on startup is\b|"
    r"No available memory for the cache blocks|"
    r"To serve at least one request with the models?'s max seq len|"
    r"max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV|"
    r"Failed to load model - not enough GPU memory|"
    r"No CUDA GPUs are available|Current node has no GPU available|"
    r"User-specified max_model_len \(\d+\) is greater than|"
    r"(?:CUDA|HIP) out of memory|OutOfMemoryError|NCCL error\b|"
    r"Timed out waiting for engine core processes to start|"
    r"Timed out waiting for engines to send ?initial message|"  # vLLM printed "sendinitial"
    r"A worker died or was killed while executing a task by an unexpected system error|"
    r"exceeds available Mamba cache blocks"
)
# The multiproc executor's worker logs "WorkerProc failed to start." when its constructor raises
# (0.8+), and the engine raises "WorkerProc initialization failed due to an exception in a
# background process": startup only, like the engine's own line.
STARTUP_FAIL = re.compile(
    r"EngineCore failed to start|Engine core initialization failed|"
    r"WorkerProc failed to start|WorkerProc initialization failed"
)
# V1's run_engine_core (0.7-0.8) logged "EngineCore hit an exception" whether the engine's
# constructor or its busy loop raised: its traceback's frames say which (vllm#14765).
EITHER_FAIL = re.compile(r"EngineCore hit an exception")
GENERIC_FAIL = re.compile(f"{STARTUP_FAIL.pattern}|{EITHER_FAIL.pattern}")
# The engine died under a running server or job ("encountered a fatal error" is what
# run_engine_core logs when the busy loop raises; "failed to start" when the constructor does;
# the API server's output handler and V0's background task fail when their engine is gone;
# V1's multiproc executor logs "Worker proc VllmWorker-N died unexpectedly[ (exit code: N)],
# shutting down executor." when a worker process dies, before the engine reports its error;
# V0 marks its engine errored and re-raises when an iteration times out, 0.4.1 on; its API
# server logs "MQLLMEngine is already dead, terminating server process" at CRITICAL on a request
# that finds its engine process gone, "AsyncLLMEngine ..." in-process, 0.6-0.10).
# A process death is reported by monitors that run through the engine's profile and capture
# too: a line only a starting engine logs, after it, says the start failed (1Cat-vLLM#539).
DIED = re.compile(r"(?:Engine core|Worker) proc \S+ died unexpectedly|engine core exited unexp")
# run_engine_core's header over the busy loop's traceback: that traceback's exception is why.
FATAL_HEADER = re.compile(r"EngineCore encountered a fatal error")
# What the engine dumps (0.9+, ``dump_input.py``) when model execution raises, before that
# header: the engine died serving; its error is in the lines that follow, if captured.
DUMP = re.compile(
    r"Dumping input data for V1 LLM engine|Dumping scheduler output for model execution"
)
CRASH = re.compile(
    r"Engine core proc \S+ died unexpectedly|engine core exited unexpectedly|"
    r"Worker proc \S+ died unexpectedly|"
    r"Engine loop has died|EngineDeadError|EngineCore encountered a fatal error|"
    r"AsyncLLM output_handler failed|Engine background task failed|Engine iteration timed out|"
    r"(?:MQ|Async)LLMEngine is already dead"
)
# The shell's word for its foreground job dying of SIGKILL (mostly the kernel's OOM killer):
# the server process is gone, whatever its engine was doing (dusty-nv/jetson-containers#795).
KILLED = "Killed"
TRACEBACK = "Traceback (most recent call last):"
# Python's word for an exception it reported and went on from (a destructor's at interpreter
# exit, "Exception ignored in: <function HPUModelRunner.__del__ at 0x...>"; 3.14 says "while
# calling deallocator"): the traceback it prints next fails nothing.
IGNORED = re.compile(r"^Exception ignored (?:in|while)\b")
# The last line of a traceback: the exception, unindented.
EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)"
)
# Frames (and their code lines) that say where a traceback pasted without vLLM's header line
# was raised: run_engine_core builds the engine (EngineCoreProc(...), whose __init__ runs
# executor_class(...) and _initialize_kv_caches) and logs "EngineCore failed to start." when
# that raises, or "EngineCore encountered a fatal error." when run_busy_loop does; the API
# server starts its engines through AsyncLLM.from_vllm_config, make_async_mp_client and
# launch_core_engines / wait_for_engine_startup; its run_server is the API server exiting (a port
# already bound, an engine that never came up) where no line said it served. A worker's own
# startup steps (0.5 on: init_device, load_model, the memory profile, sizing the KV cache, the
# warmup and CUDA graph capture) run only while its engine starts: a worker's traceback through
# them ("WorkerProc hit an exception." in worker_busy_loop, V0's "Exception in worker") too. So
# does the model loader building the model (a model's make_layers among its steps). Model runner
# V2 captures through its cudagraph_utils' capture (vllm#48749).
STARTUP_FRAME = re.compile(
    r"\bin (?:_initialize_kv_caches|from_vllm_config|from_engine_args|make_async_mp_client|"
    r"make_client|launch_core_engines|wait_for_engine_startup|run_server|init_device|load_model|"
    r"determine_available_memory|determine_num_available_blocks|profile_run|get_kv_cache_configs|"
    r"_?check_enough_kv_cache_memory|compile_or_warm_up_model|capture_model|capture|"
    r"_?initialize_model|init_vllm_registered_model|make_layers)$|"
    r"\brun_server\(args\)|EngineCoreProc\(|\bexecutor_class\("
)
# A V1 worker runs execute_model and sample_tokens only for the engine's steps (its profile,
# warmup and capture call _dummy_run); V0's profile_run called its model runner's execute_model.
# The Ray executor builds its compiled graph on the engine's first step and reads its output
# only for the steps: a frame in that graph or its channels is a serving engine's. V0's
# AsyncLLMEngine runs run_engine_loop and engine_step only once it serves (its first request).
# The engine's run_engine_core logs a traceback at ERROR only when the engine dies: a frame of
# it while the start has not served is a failed start, even where the capture lost its header
# ("EngineCore failed to start.") and its exception. Its logger is core.py ("[core.py:1142]",
# "[v1/engine/core.py:718]" with DEBUG paths; "core.py:1231]" in the format of 0.1-0.5, which
# some 2026 builds print again: vllm#48749, #54559). A V1 worker's busy loop (multiproc_executor.py,
# "WorkerProc hit an exception.") runs the engine's startup calls until the server serves: its
# traceback then fails the start too (intel/llm-scaler#382, cut before its startup frames).
ENGINE_LOGGED = re.compile(r"[\s\[/](?:core|multiproc_executor)\.py:\d+\\?\]")
# The server process's own top frame: its CLI's main ("vllm serve") or the old module entry
# ("python -m vllm.entrypoints.openai.api_server"). A traceback reaching it was uncaught: that
# process is dying.
SERVER_TOP = re.compile(
    r'/entrypoints/(?:cli/main\.py", line \d+, in main|'
    r'openai/api_server\.py", line \d+, in <module>)$'
)
RUNNING_FRAME = re.compile(
    r"\bin (?:run_busy_loop|_process_engine_step|run_engine_loop|engine_step)$|\.run_busy_loop\(\)|"
    r"/v1/worker/(?:\w+/)?\w+\.py\", line \d+, in (?:execute_model|sample_tokens)$|"
    r"/ray/(?:dag|experimental/channel)/\w+\.py\", line \d+, in \w+$"
)
# A frame line, whose indent a paste may have lost (vLLM's header before it, nothing between).
FRAME = re.compile(r'File "[^"]*", line \d+, in ')
# A server still starting waits on its workers' compile, weight quantization and warmup for
# minutes, and the shared-memory line says so; after a stop, a worker waits on a gone engine.
# So that signal is quiet in these phases.
ALWAYS: frozenset[str] = frozenset()  # a hang signal in every phase
STARTING = frozenset(
    ("starting", "loading_weights", "loading_drafter", "profiling", "capturing_cuda_graphs")
)
STARTING_OR_STOPPED = STARTING | {"stopped"}
# The lines vLLM prints when its engine stops making progress, by the name we give them, with
# the phases in which a line says nothing of a hang.
# The shared-memory line said "No available block found in 60 second." (WARNING) in 0.5.1-0.6.4,
# then "No available shared memory broadcast block found in 60 second(s)" (its reader's copy
# lacks the space: "foundin"). Torch's NCCL watchdog (TP/PP/DP ranks) logs a collective that ran
# past its timeout once per rank; the "watchdog thread terminated with exception: ..." line after
# it restates it. "watchdog got stuck" is its heartbeat monitor: a NCCL/CUDA call never returned.
# With the Ray executor, a worker that never returns its step's output times out the engine's
# read of the compiled graph's channel (RayChannelTimeoutError, 0.7+; read only for the steps)
# or its ray.get (GetTimeoutError); the exception line names it, a source line or an import
# does not. A ray.get timing out while the start is under way waits on a start, not a step:
# vLLM's placement-group wait (0.4-0.5), Ray Data's actor pool waiting on actors still loading
# (ray#47183, vllm#9694): quiet then, like the shared-memory line.
HANG_SIGNALS = (
    (
        "shm_broadcast_timeout",
        re.compile(
            r"No available shared memory broadcast block found|"
            r"No available block found in \d+ second"
        ),
        STARTING_OR_STOPPED,
    ),
    ("rpc_timeout", re.compile(r"RPC call to \w+ timed out"), ALWAYS),
    ("ray_timeout", re.compile(r"\bRayChannelTimeoutError: "), ALWAYS),
    ("ray_timeout", re.compile(r"\bGetTimeoutError: "), STARTING),
    ("engine_iteration_timeout", re.compile(r"Engine iteration timed out"), ALWAYS),
    (
        "nccl_watchdog_timeout",
        re.compile(
            r"^(?!.*thread terminated with exception).*"
            r"Watchdog caught collective operation timeout"
        ),
        ALWAYS,
    ),
    ("nccl_watchdog_stuck", re.compile(r"ProcessGroupNCCL's watchdog got stuck"), ALWAYS),
    ("watchdog_stack_dump", re.compile(r"\[Watchdog\]\s*Dumped stack to"), ALWAYS),
    ("fsm_advance_failed", re.compile(r"Failed to advance FSM"), ALWAYS),
)
# V0 and V1 up to 0.8.3 print the stats line with no "Engine NNN: " in front; V0 counts
# "Swapped" and "Pending" requests and a "CPU KV cache usage" (0.5-0.10), and prints its
# prefix-cache hit rates on a line of their own ("Prefix cache hit rate: GPU: X%, CPU: Y%").
# "(?<!\d)": the count starts a number, else a long one is retried from each of its digits.
STATS = re.compile(
    r"(?:(?:Engine (?P<engine>\d+)|(?<!\d)(?P<n>\d+) Engines Aggregated): )?"
    r"Avg prompt throughput: |"
    r"Prefix cache hit rate: GPU: "
)
# "Speculative metrics: " is V0's line (0.5-0.10) and V1's before 0.8.4 (vllm#15902).
SPEC = re.compile(r"SpecDecoding metrics: |Speculative metrics: ")
