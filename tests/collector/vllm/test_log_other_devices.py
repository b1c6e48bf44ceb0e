"""Starts on devices other than NVIDIA's, and a start's end that is no failure, as the plan
reads them; each case built from a real line in tests/fixtures/real/vllm (Gaudi's HPU, the CPU
backend, ROCm)."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from collector.vllm.plan import StartupPlan


def _plan(lines: list[str]) -> StartupPlan:
    [plan] = parse_vllm_log(lines)
    return plan


HPU_LOAD = (
    "INFO 09-24 17:31:39 habana_model_runner.py:640] Loading model weights took in total "
    "15.05 GiB of device memory (15.05 GiB/94.62 GiB used) and 1.056 GiB of host memory "
    "(8.188 GiB/108.2 GiB used)"
)


def test_gaudis_hpu_blocks_hold_128_tokens_each() -> None:
    plan = _plan(
        [
            HPU_LOAD,
            "INFO 09-24 17:31:40 habana_executor.py:85] # HPU blocks: 4107, # CPU blocks: 256",
        ]
    )
    assert plan.kv_cache_blocks == 4107 and plan.kv_cache_tokens == 4107 * 128


def test_the_vllm_hpu_plugins_lower_case_blocks_too() -> None:
    plan = _plan(
        [
            "INFO 06-04 01:18:34 [default_loader.py:272] Loading weights took 4.12 seconds",
            "INFO 06-04 01:18:37 [executor_base.py:113] # hpu blocks: 6399, # CPU blocks: 256",
        ]
    )
    assert plan.kv_cache_tokens == 819072


def test_the_cpu_backends_first_count_is_its_cache_the_second_the_swap_space() -> None:
    for line, tokens in (
        ("INFO 01-20 13:12:09 executor_base.py:80] # CPU blocks: 7281, # CPU blocks: 0", 116496),
        ("INFO 07-15 21:27:12 [executor_base.py:113] # cpu blocks: 2340, # CPU blocks: 0", 37440),
    ):
        plan = _plan(
            ["INFO 01-20 13:12:09 llm_engine.py:430] Loading weights took 0.68 seconds", line]
        )
        assert plan.kv_cache_tokens == tokens


def test_a_stated_block_size_beats_the_devices_default() -> None:
    # Constructed from the real lines: the same HPU start with --block-size 256 on its args line.
    plan = _plan(
        [
            "INFO 08-02 17:37:40 api_server.py:1] vLLM API server version 0.5.3.post1",
            "INFO 08-02 17:37:40 api_server.py:1] args: Namespace(block_size=256, model='m')",
            HPU_LOAD,
            "INFO 08-02 17:37:54 hpu_executor.py:85] # HPU blocks: 1519, # CPU blocks: 0",
        ]
    )
    assert plan.kv_cache_tokens == 1519 * 256


def test_the_hpu_workers_memory_split_states_the_kv_cache_memory() -> None:
    plan = _plan(
        [
            HPU_LOAD,
            "INFO 09-24 17:31:40 habana_worker.py:177] Free device memory: 79.22 GiB, 71.3 GiB "
            "usable (gpu_memory_utilization=0.9), 7.13 GiB reserved for HPUGraphs "
            "(VLLM_GRAPH_RESERVED_MEM=0.1), 64.17 GiB reserved for KV cache",
        ]
    )
    assert plan.kv_cache_gib == 64.17


def test_an_exception_python_ignored_at_exit_is_no_failure() -> None:
    plan = _plan(
        [
            "INFO 06-04 01:18:37 [llm_engine.py:429] init engine (profile, create kv cache, "
            "warmup model) took 2.73 seconds",
            "Exception ignored in: <function HPUModelRunner.__del__ at 0x7f11eff56440>",
            "Traceback (most recent call last):",
            '  File "/software/users/chendixue/dev/vllm-hpu/vllm_hpu/worker/hpu_model_runner.py",'
            " line 3130, in __del__",
            "ImportError: sys.meta_path is None, Python is likely shutting down",
        ]
    )
    assert (plan.outcome, plan.error) == ("incomplete", None)


def test_a_traceback_after_the_ignored_one_still_fails_the_start() -> None:
    # Constructed: the ignored exception's traceback, then a start failing with one of its own.
    plan = _plan(
        [
            "INFO 06-04 01:18:34 [default_loader.py:272] Loading weights took 4.12 seconds",
            "Exception ignored in: <function HPUModelRunner.__del__ at 0x7f11eff56440>",
            "Traceback (most recent call last):",
            "ImportError: sys.meta_path is None, Python is likely shutting down",
            "Traceback (most recent call last):",
            "ValueError: No available memory for the cache blocks.",
        ]
    )
    assert plan.outcome == "failed" and plan.error is not None
    assert plan.error.startswith("ValueError")


FAULT = (
    "Memory access fault by GPU node-1 (Agent handle: 0x43578c10) on address 0x7f58f8001000. "
    "Reason: Page not present or supervisor privilege."
)


def test_rocms_memory_access_fault_fails_a_start() -> None:
    plan = _plan(
        [
            "(EngineCore_DP0 pid=178) INFO 11-28 23:05:46 [core.py:97] Initializing a V1 LLM "
            "engine (v0.11.1rc2.dev141+g38f225c2a) with config: model='m', max_seq_len=32768",
            FAULT,
        ]
    )
    assert (plan.outcome, plan.error) == ("failed", FAULT)


def test_rocms_memory_access_fault_crashes_a_serving_engine() -> None:
    # Constructed: the same fault after the server said it serves.
    plan = _plan(
        [
            "(EngineCore_DP0 pid=178) INFO 11-28 23:05:46 [core.py:97] Initializing a V1 LLM "
            "engine (v0.11.1rc2.dev141+g38f225c2a) with config: model='m', max_seq_len=32768",
            "(APIServer pid=13) INFO:     Application startup complete.",
            FAULT,
        ]
    )
    assert (plan.outcome, plan.error) == ("crashed", FAULT)


def test_a_hybrid_models_attention_block_size_is_the_starts_block_size() -> None:
    # Real lines: Sandermage/genesis-vllm-patches#24 (0.2x, TP8): vLLM sizes the attention
    # block of a mamba + attention model to the mamba page, overriding the args' block size.
    plan = _plan(
        [
            "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: "
            "{'block_size': 16}",  # constructed start line: the args' block size
            "(Worker_TP0 pid=92375) INFO 05-08 16:18:24 [gpu_model_runner.py:4960] Model loading "
            "took 15.26 GiB memory and 23.107530 seconds",
            "(Worker_TP0 pid=92375) INFO 05-08 16:18:24 [interface.py:645] Setting attention "
            "block size to 544 tokens to ensure that attention page size is >= mamba page size.",
        ]
    )
    assert plan.block_size == 544
