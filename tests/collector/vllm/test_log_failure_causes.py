"""Why a start failed, as the engine's own lines say it: read from DGX Spark (GB10) server
logs in public repositories (``tests/fixtures/real/vllm``)."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from tests.support.real_corpus import vllm_logs


def _lines(stem: str) -> list[str]:
    [log] = [log for log in vllm_logs() if log.path.stem == stem]
    return log.lines


def test_a_traceback_logged_as_a_warning_fails_nothing() -> None:
    # jethac/dgx-spark-hijinks: vLLM logs at WARNING that deep_gemm "was found but failed to
    # import", with the ImportError's traceback, and goes on to capture and serve.
    lines = _lines("v0.22-spark-hijinks-gemma4-31b-deep-gemm-warning-traceback-started")
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error) == ("started", None)


def test_the_exception_under_engine_core_failed_to_start_is_why_it_failed() -> None:
    # jethac/dgx-spark-hijinks: "EngineCore failed to start." and its traceback, which ends in
    # FlashInfer's CuTe DSL import raising AttributeError; "Process EngineCore:" and the
    # process's own copy of the traceback come after.
    lines = _lines("v0.2x-spark-hijinks-qwen36-fp8-kv-flashinfer-cute-attr-failed")
    [plan] = parse_vllm_log(lines)
    cause = next(line for line in lines if "ERROR" in line and "AttributeError: " in line)
    assert (plan.outcome, plan.error) == ("failed", cause)


def test_the_cause_is_read_through_the_process_traceback_interleaved_with_it() -> None:
    # jethac/dgx-spark-hijinks (a DEBUG log's last lines): the process's "Traceback (most
    # recent call last):" cuts into the logged one before its TypeError.
    lines = _lines("v0.2x-spark-hijinks-gemma3-debug-warmup-interleaved-traceback-failed")
    [plan] = parse_vllm_log(lines)
    cause = next(line for line in lines if "ERROR" in line and "TypeError: " in line)
    assert (plan.outcome, plan.error) == ("failed", cause)


def test_the_cause_is_the_failing_engines_own_exception() -> None:
    # Constructed: data-parallel engines' tracebacks interleave; the exception under one
    # engine's failure line is the one its own process logs.
    failed = "(EngineCore_DP0 pid=1) ERROR 01-12 01:09:14 [core.py:708] EngineCore failed to start."
    other = "(EngineCore_DP1 pid=2) ERROR 01-12 01:09:14 [core.py:708] ValueError: the other's"
    mine = "(EngineCore_DP0 pid=1) ERROR 01-12 01:09:14 [core.py:708] RuntimeError: its own"
    [plan] = parse_vllm_log([failed, other, mine])
    assert (plan.outcome, plan.error) == ("failed", mine)


def test_a_root_cause_before_the_failure_line_stays_the_error() -> None:
    # Constructed: an out-of-memory line, then the engine's failure line and its traceback.
    head = "(EngineCore pid=1) ERROR 01-12 01:09:14 [core.py:708] "
    oom = head + "torch.OutOfMemoryError: CUDA out of memory."
    failed = head + "EngineCore failed to start."
    later = head + "RuntimeError: later"
    [plan] = parse_vllm_log([oom, failed, later])
    assert (plan.outcome, plan.error) == ("failed", oom)


def test_v0s_zero_device_blocks_fail_the_start() -> None:
    # vllm#13882: a V0 profile leaves -1.05 GiB for the KV cache and the executor logs "# cuda
    # blocks: 0"; V0 raises "No available memory for the cache blocks" on a device without a
    # block, and the excerpt ends in the job's traceback before that exception.
    [plan] = parse_vllm_log(_lines("v0.7-vllm-13882-rtx4060-v0-negative-kv-cuda-blocks-zero"))
    assert (plan.outcome, plan.error, plan.kv_cache_blocks) == ("failed", None, 0)


def test_the_exception_after_zero_blocks_is_the_error() -> None:
    # The lines are vllm#10439's own (a composed engine's last traceback lines), after a
    # constructed V0 blocks line that counts no GPU block.
    lines = [
        "INFO 11-18 18:07:27 distributed_gpu_executor.py:57] # GPU blocks: 0, # CPU blocks: 21845"
    ]
    lines += [
        line[len("vllm-1  | ") :] for line in _lines("v0.6-vllm-10439-compose-v0-no-cache-memory")
    ]
    [plan] = parse_vllm_log(lines)
    assert plan.outcome == "failed" and plan.error == lines[-1]


def test_an_unprefixed_traceback_through_the_engines_construction_fails_the_start() -> None:
    # vllm#2418: an offline script's traceback, with no log prefix, through LLM.__init__ and
    # LLMEngine.from_engine_args after the engine's "# GPU blocks" line, cut before its exception.
    [plan] = parse_vllm_log(_lines("v0.2-vllm-2418-v0-gpu-blocks-then-llm-init-traceback"))
    assert (plan.outcome, plan.error) == ("failed", None)


def test_a_traceback_without_startup_frames_leaves_the_start_under_way() -> None:
    # Constructed: a start's load line, then a traceback through a script's own frames only.
    lines = [
        "INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB",
        "Traceback (most recent call last):",
        '  File "/srv/job.py", line 8, in <module>',
        "    main()",
    ]
    [plan] = parse_vllm_log(lines)
    assert plan.outcome == "incomplete"


def test_the_free_memory_error_wrapped_before_its_end_still_fails_the_start() -> None:
    # Blackwellboy/model-serving-minefield#45 (GB10): the startup free-memory check's
    # ValueError pasted in two lines, cut after "on startup is"; the second line states the
    # utilization asked for.
    lines = _lines("minefield-45-gb10-free-memory-error-wrapped")
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error) == ("failed", lines[0])
    assert plan.gpu_memory_utilization == 0.91


def test_the_utilization_the_free_memory_error_states() -> None:
    # pytorch/pytorch#175666's line (vLLM 0.1x, a CI build): "(0.9, 19.84 GiB)".
    [log] = [log for log in vllm_logs() if "175666" in log.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert plan.gpu_memory_utilization == 0.9
