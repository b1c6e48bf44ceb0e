"""How a start fails in the words other platforms, shells and vLLM's own typos give it: read
from real logs in other projects' trackers (``tests/fixtures/real/vllm``)."""

from __future__ import annotations

from collector.vllm.log_lines import records, split_vllm_line
from collector.vllm.log_parser import parse_vllm_log
from tests.support.real_corpus import vllm_logs
from tests.support.timing import fastest


def _lines(stem: str) -> list[str]:
    [log] = [log for log in vllm_logs() if log.path.stem == stem]
    return log.lines


def test_the_engines_initial_message_timeout_in_vllms_own_joined_words() -> None:
    # vllm-project/vllm-ascend#3977: core_client's two literals join without a space
    # ("...to send" "initial message..."): the API server gave up on its engines.
    lines = _lines("v0.1x-ascend-3977-apiserver-engines-sendinitial-timeout")
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error) == ("failed", lines[-1])


def test_rocms_allocator_running_out_is_a_root_cause() -> None:
    # nlzy/vllm-gfx906#14: PyTorch's ROCm allocator says "HIP out of memory" where CUDA's
    # says "CUDA out of memory" (the paste dropped "torch.OutOfMemoryError: " before it).
    # Constructed: that record alone, cut from the line the paste joined it into.
    [line] = _lines("v0.9-gfx906-14-hip-oom-joined-records")
    oom = line[: line.index("environment-variables)") + len("environment-variables)")]
    [plan] = parse_vllm_log([oom])
    assert (plan.outcome, plan.error) == ("failed", oom)


def test_records_a_paste_joined_with_runs_of_spaces_are_read_one_by_one() -> None:
    # nlzy/vllm-gfx906#14: the terminal copy joined the OOM and the engine's traceback header
    # into one line, each record padded with spaces; the first is no shipper's prefix.
    [line] = _lines("v0.9-gfx906-14-hip-oom-joined-records")
    [plan] = parse_vllm_log([line])
    assert plan.outcome == "failed"
    assert plan.error is not None and plan.error.startswith("HIP out of memory. Tried to")
    assert plan.error.endswith("environment-variables)")


def test_joined_records_are_found_in_linear_time() -> None:
    # Constructed: runs of spaces, each before a near-header or a header, against a line of
    # the same length without them (no wall-clock limit: the machine is shared).
    def cost(record: str) -> float:
        line = record * (200_000 // len(record))
        return fastest(lambda: parse_vllm_log([line]))

    plain = "x" * 64
    assert cost("x" + " " * 50 + "INFO 07-04 1") < 50 * cost(plain)
    assert cost("x" + " " * 40 + "INFO 07-04 14:53:23 [a.py:1] y") < 50 * cost(plain)
    assert cost("x" + " " * 20_000) < 50 * cost(plain)


def test_a_progress_bar_with_a_record_glued_after_it_is_read_as_both() -> None:
    # vllm-project/vllm#46933: tqdm redraws its bar with no newline, so the worker's next record
    # lands right after the bar's "]": the capture bar opens the start, the record stays whole.
    lines = _lines("v0.2x-vllm-46933-offload-capture-bar-glued-shm")
    glued = lines[1]
    cut = glued.index("(Worker_TP1 ")
    assert records(glued) == [glued[:cut], glued[cut:]]
    [plan] = parse_vllm_log(lines)
    assert [p["phase"] for p in plan.phases] == ["capturing_cuda_graphs"]
    # Constructed: a "]" that ends no bar keeps its record whole.
    line = "[model.py:12](EngineCore_DP0 pid=1) INFO 06-27 19:50:00 [a.py:1] x"
    assert records(line) == [line]


def test_glued_progress_bars_are_found_in_linear_time() -> None:
    # Constructed: the bar's count and bracket repeated without an end, or without a tag after.
    def cost(record: str) -> float:
        line = record * (200_000 // len(record))
        return fastest(lambda: records(line))

    plain = "x" * 64
    assert cost("1" * 30 + "/") < 50 * cost(plain)
    assert cost("| 1/83 [00:00<00:43, ") < 50 * cost(plain)
    assert cost("1/8 [a](Worker_TP1 pid=") < 50 * cost(plain)


def test_the_hpu_runners_load_summary_states_the_weights_memory() -> None:
    # HabanaAI/vllm-fork#488 (Gaudi 2): the HPU model runner's "Loading model weights took in
    # total 32.48 GiB of device memory (...)" is V0's load line in its words.
    lines = _lines("v0.6-habana-488-gaudi2-inc-fp8-ray-load")
    [plan] = parse_vllm_log(lines)
    assert (plan.model_load_gib, plan.model_load_s, plan.phase) == (32.48, None, "loading_weights")


def test_the_shells_killed_is_the_process_dying() -> None:
    # dusty-nv/jetson-containers#795 (Orin NX, unified memory): after the KV plan the shell
    # reports "Killed" (SIGKILL, the kernel's OOM killer): the start died there.
    lines = _lines("v0.6-jetson-795-orin-nx-gguf-kv-then-killed")
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error, plan.kv_cache_tokens) == ("failed", "Killed", 189376)
    # Constructed around the real line: a server that was serving crashed; alone, or after
    # a clean stop, it says nothing of a start.
    serving = [lines[-2], "INFO:     Application startup complete.", "Killed"]
    [plan] = parse_vllm_log(serving)
    assert (plan.outcome, plan.error) == ("crashed", "Killed")
    assert parse_vllm_log(["Killed"]) == []
    stopped = [*serving[:2], "INFO:     Shutting down", "Killed"]
    [plan] = parse_vllm_log(stopped)
    assert (plan.outcome, plan.error) == ("started", None)


def test_a_workers_busy_loop_raising_while_its_start_is_under_way_failed_it() -> None:
    # intel/llm-scaler#382 (0.14, two Arc B70): the capture begins at the weights' load line,
    # then rank 0's busy loop raises ("WorkerProc hit an exception.", logged by
    # multiproc_executor.py) during the profile run; cut before its startup frames. The busy
    # loop runs the engine's startup calls until the server serves: the start failed.
    lines = _lines("v0.14-llmscaler-382-b70-worker-exception-profiling")
    [plan] = parse_vllm_log(lines)
    assert plan.phases[0]["phase"] == "loading_weights"
    assert (plan.outcome, plan.error) == ("failed", None)
    # Constructed: the same traceback once the server serves decides nothing.
    served = [lines[0], "INFO:     Application startup complete.", *lines[3:]]
    [plan] = parse_vllm_log(served)
    assert plan.outcome == "started"


def test_killed_counts_only_from_the_servers_own_stream() -> None:
    # Constructed around the real lines of dusty-nv/jetson-containers#795: a compose stream or a
    # journal interleaves other processes' output; the shell's "Killed" is the server's only
    # where it comes from the stream vLLM's own lines come from.
    lines = _lines("v0.6-jetson-795-orin-nx-gguf-kv-then-killed")
    compose = [f"vllm-1  | {line}" for line in lines[:-1]]
    [plan] = parse_vllm_log([*compose, "bench-1  | Killed"])
    assert (plan.outcome, plan.error) == ("incomplete", None)
    [plan] = parse_vllm_log([*compose, "vllm-1  | Killed"])
    assert (plan.outcome, plan.error) == ("failed", "Killed")
    journal = [f"Jan 23 07:34:26 orin vllm[812]: {line}" for line in lines[:-1]]
    [plan] = parse_vllm_log([*journal, "Jan 23 07:34:27 orin client[950]: Killed"])
    assert (plan.outcome, plan.error) == ("incomplete", None)
    [plan] = parse_vllm_log([*journal, "Jan 23 07:34:27 orin vllm[812]: Killed"])
    assert (plan.outcome, plan.error) == ("failed", "Killed")


def test_a_process_tag_padded_before_its_header_stays_with_it() -> None:
    # Constructed: Ray's tag (ray-project/ray#59778's form) padded with spaces before vLLM's
    # header is one record, not a joined paste: the header keeps its tag.
    line = (
        "(RayWorkerWrapper pid=2361)    "
        "INFO 12-29 02:06:07 [gpu_model_runner.py:3659] Model loading took 2.5355 GiB memory "
        "and 1.469344 seconds"
    )
    assert records(line) == [line]
    assert split_vllm_line(line).proc == "RayWorkerWrapper pid=2361"


# intel/llm-scaler#382's first line, and a worker's busy-loop traceback through a step
# (vllm-project/vllm#43042, lines verbatim, cut where the excerpt ends).
_LOADED = (
    "(Worker_TP0 pid=1681) INFO 04-25 19:53:57 [gpu_model_runner.py:3908] Model loading took "
    "17.17 GiB memory and 700.122302 seconds"
)
_STEP_RAISED = [
    "(Worker_TP0 pid=2019) ERROR 05-12 09:17:24 [multiproc_executor.py:932] Traceback (most "
    "recent call last):",
    '(Worker_TP0 pid=2019) ERROR 05-12 09:17:24 [multiproc_executor.py:932]   File "/usr/local/'
    'python3.11.10/lib/python3.11/site-packages/vllm/v1/executor/multiproc_executor.py", line '
    "927, in worker_busy_loop",
    "(Worker_TP0 pid=2019) ERROR 05-12 09:17:24 [multiproc_executor.py:932]     output = "
    "func(*args, **kwargs)",
    '(Worker_TP0 pid=2019) ERROR 05-12 09:17:24 [multiproc_executor.py:932]   File "/usr/local/'
    'python3.11.10/lib/python3.11/site-packages/vllm/v1/worker/worker_base.py", line 332, in '
    "execute_model",
]


def test_a_workers_busy_loop_raising_in_a_step_crashed_a_running_engine() -> None:
    # Constructed from real lines: an offline LLM() job never prints a serving line, so its
    # start stays under way; a worker's traceback through execute_model is a step's: the
    # engine was running, it crashed (no failed start).
    [plan] = parse_vllm_log([_LOADED, *_STEP_RAISED])
    assert (plan.outcome, plan.error) == ("crashed", None)


def test_a_workers_busy_loop_raising_after_the_engine_is_ready_crashed_it() -> None:
    # Constructed from real lines: the engine's init total (LMCache/LMCache#1740) says the
    # engine is ready; a worker's busy-loop traceback after it (intel/llm-scaler#382's, cut
    # before its frames say where) is a running engine's, then the job's prompts (lmflow#942).
    init = (
        "(EngineCore_DP0 pid=1021360) INFO 10-08 06:08:17 [core.py:218] init engine (profile, "
        "create kv cache, warmup model) took 13.90 seconds"
    )
    bar = (
        "Processed prompts: 0it [00:00, ?it/s, est. speed input: 0.00 toks/s, output: 0.00 toks/s]"
    )
    worker = _lines("v0.14-llmscaler-382-b70-worker-exception-profiling")[3:]
    [plan] = parse_vllm_log([_LOADED, init, bar, *worker])
    assert plan.outcome == "crashed"


def test_model_runner_v2s_capture_frame_says_the_start_failed() -> None:
    # vllm-project/vllm#48749: the engine's traceback, cut to frames only, through model runner
    # V2's cudagraph_utils "in capture" (and the MTP speculator's prefill): CUDA graph capture
    # runs only while the engine starts.
    [plan] = parse_vllm_log(_lines("v0.2x-vllm-48749-mrv2-capture-frames-only"))
    assert plan.outcome == "failed"


def test_an_engine_frame_without_a_bracket_before_its_source_fails_the_start() -> None:
    # vllm-project/vllm#48749 logs "ERROR 07-15 00:27:03 core.py:1231]" (no "[", the format of
    # 0.1-0.5): its engine's frames fail a start under way. Constructed: a compile total from
    # vllm#54559, in the same format, opens the start before those frames.
    start = (
        "(Worker_TP0_EP0 pid=356) INFO 08-31 11:34:51 monitor.py:53] "
        "torch.compile took 40.21 s in total"
    )
    frames = _lines("v0.2x-vllm-48749-mrv2-capture-frames-only")
    [plan] = parse_vllm_log([start, *frames])
    assert plan.outcome == "failed"


def test_a_request_answered_with_an_error_status_says_the_server_is_up() -> None:
    # A 400 (production-stack#43), a 500 and its ASGI traceback (vllm#11629, graphrag#357), a
    # run of 500s (intel/llm-scaler#284): only a server past its start answers, so each capture
    # is a start that is serving, and a request's error is no crash.
    for stem in (
        "prodstack-43-400-then-health-probes",
        "v0.6-vllm-11629-500-exception-group",
        "v0.5-graphrag-357-500-asgi-traceback",
        "v0.1x-llmscaler-284-xpu-tp2-500-access-lines",
    ):
        [plan] = parse_vllm_log(_lines(stem))
        assert (plan.outcome, plan.error) == ("started", None), stem
    # Constructed: /health answers 503 once the engine is dead, no sign of a start serving.
    assert (
        parse_vllm_log(['INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 503 Service Unavailable'])
        == []
    )


def test_a_hybrid_models_mamba_state_pool_below_max_num_seqs_is_the_root_cause() -> None:
    # A saved 0.29 serve log (at0rp1d0i-cell/peephole) and vLLM CI's line (vllm#38632): the
    # engine's exception says why the start failed, not "EngineCore failed to start." above it.
    [plan] = parse_vllm_log(_lines("v0.29-peephole-mamba-blocks-below-max-num-seqs"))
    assert plan.outcome == "failed" and plan.kv_cache_tokens == 305995
    assert plan.error is not None and "exceeds available Mamba cache blocks (635)" in plan.error
    [plan] = parse_vllm_log(_lines("v0.1x-vllm-38632-ci-worker-failed-mamba-blocks"))
    assert plan.outcome == "failed"
    assert plan.error is not None and "exceeds available Mamba cache blocks (600)" in plan.error


def test_a_router_answering_in_the_same_capture_says_nothing_of_the_start() -> None:
    # Constructed: a compose capture of a vLLM service and a router in front of it. While the
    # engine loads, the router answers the client 503 and its own /health 200; the start then
    # fails. Only the server's own stream's error answers and probes say it was serving (a
    # router answers a /v1 request 200 only once a server is).
    error = (
        "ERROR 07-15 00:20:40 [core.py:700] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    )
    vllm = [
        "INFO 07-15 00:20:01 [api_server.py:1000] vLLM API server version 0.10.0",
        "INFO 07-15 00:20:30 [gpu_model_runner.py:1000] Model loading took 15.2 GiB and 20.1 "
        "seconds",
        "ERROR 07-15 00:20:40 [core.py:700] EngineCore failed to start.",
        error,
    ]
    router = [
        'INFO:     10.0.0.9:51234 - "POST /v1/chat/completions HTTP/1.1" 503 Service Unavailable',
        'INFO:     10.0.0.7:40000 - "GET /health HTTP/1.1" 200 OK',
    ]
    lines = [f"vllm-1    | {line}" for line in vllm[:2]]
    lines += [f"router-1  | {line}" for line in router]
    lines += [f"vllm-1    | {line}" for line in vllm[2:]]
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error) == ("failed", error)
    # the server's own access line is its answer whatever the status
    mine = [f"vllm-1    | {line}" for line in vllm[:2]] + [
        'vllm-1    | (APIServer pid=1) INFO:     10.0.0.9:51234 - "POST /v1/chat/completions '
        'HTTP/1.1" 400 Bad Request'
    ]
    [plan] = parse_vllm_log(mine)
    assert plan.outcome == "started"


def test_the_api_server_waiting_for_its_engine_is_a_start_under_way() -> None:
    # vllm-omni#5122 (NPU, DEBUG): the capture begins at a fork's own loader lines; the API
    # server's "Waiting for 1 local, 0 remote core engine proc(s) to start." is printed only
    # while its engine starts.
    [log] = [log for log in vllm_logs() if "omni-5122" in log.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert (plan.outcome, plan.error) == ("incomplete", None)
