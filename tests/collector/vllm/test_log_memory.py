"""The memory plan and the serving configuration as the plan reads them from the lines that
state them, each case built from a real line in tests/fixtures/real/vllm."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from collector.vllm.plan import StartupPlan


def _plan(lines: list[str]) -> StartupPlan:
    [plan] = parse_vllm_log(lines)
    return plan


def test_a_drafters_max_model_len_is_not_the_starts() -> None:
    # An EAGLE3 speculator (speculators#166, vLLM 0.11): the target's config, then the drafter's.
    plan = _plan(
        [
            "INFO 10-30 14:19:20 [utils.py:253] non-default args: {'max_model_len': 1024}",
            "INFO 10-30 14:19:22 [model.py:664] Resolved architecture: LlamaForCausalLM",
            "INFO 10-30 14:19:22 [model.py:1752] Using max model len 1024",
            "INFO 10-30 14:19:22 [model.py:664] Resolved architecture: Eagle3LlamaForCausalLM",
            "INFO 10-30 14:19:22 [model.py:1752] Using max model len 131072",
        ]
    )
    assert plan.max_model_len == 1024


def test_the_engine_line_still_resolves_the_max_model_len_and_minus_one_states_none() -> None:
    plan = _plan(
        [
            "INFO 10-30 14:19:20 [utils.py:253] non-default args: {'max_model_len': -1}",
            "INFO 10-30 14:19:22 [model.py:1752] Using max model len 40960",
            "INFO 10-30 14:19:22 [model.py:1752] Using max model len 131072",
            "INFO 10-30 14:19:23 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: "
            "model='m', max_seq_len=32768, tensor_parallel_size=1",
        ]
    )
    assert plan.max_model_len == 32768


def test_the_utilization_the_memory_lines_restate() -> None:
    # Real lines: gateway-api-inference-extension#550 (0.8 V0), vllm#50722 (0.2x), vllm#39559
    # (0.18), vllm#50576 (0.2x), vllm#10517 (0.6 V0).
    lines = {
        "INFO 03-21 20:15:45 [worker.py:267] the current vLLM instance can use total_gpu_memory "
        "(79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB": 0.9,
        "(Worker_TP1 pid=4616) INFO 08-14 08:08:05 [gpu_worker.py:575] CUDA graph memory profiling "
        "is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.8500 is "
        "equivalent to --gpu-memory-utilization=0.8221 without CUDA graph memory profiling.": 0.85,
        "(EngineCore pid=1) INFO 04-13 19:51:24 [gpu_worker.py:470] In v0.19, CUDA graph memory "
        "profiling will be enabled by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), ... "
        "increase --gpu-memory-utilization from 0.9000 to 0.9690 to maintain the same": 0.9,
        "(Worker_TP0 pid=1222) INFO 08-07 23:22:57 [gpu_worker.py:789] Free memory on device "
        "(46.93/47.4 GiB) on startup. Desired GPU memory utilization is (0.95, 45.03 GiB).": 0.95,
        "INFO 12-02 10:00:00 worker.py:241] Memory profiling results: total_gpu_memory=23.58GiB "
        "non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90": 0.9,
    }
    start = "INFO 10-30 14:19:20 [utils.py:253] non-default args: {'model': 'm'}"
    for line, utilization in lines.items():
        assert _plan([start, line]).gpu_memory_utilization == utilization, line
