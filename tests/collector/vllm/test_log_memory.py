"""The memory plan and the serving configuration as the plan reads them from the lines that
state them, each case built from a real line in tests/fixtures/real/vllm."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from collector.vllm.plan import StartupPlan
from tests.support.real_corpus import vllm_logs
from tests.support.timing import fastest


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
        # vllm#10909 (0.6, December 2024): the same one-line results comma-separated, ending on
        # the sentence's full stop.
        "INFO 12-13 02:10:28 worker.py:237] Memory profiling results: duration=72.36 seconds, "
        "total_gpu_memory=79.15GiB, initial_memory_usage=19.68GiB, peak_torch_memory=34.50GiB, "
        "memory_usage_post_profile=35.32GiB, non_torch_memory=1.96GiB, kv_cache_size=34.78GiB, "
        "gpu_memory_utilization=0.90.": 0.9,
    }
    start = "INFO 10-30 14:19:20 [utils.py:253] non-default args: {'model': 'm'}"
    for line, utilization in lines.items():
        assert _plan([start, line]).gpu_memory_utilization == utilization, line


START = "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: {}"


def test_the_cuda_graph_estimate_is_the_rank_that_reserves_most() -> None:
    # vllm#37296 (0.18, TP2): the ranks' estimates differ and print in no rank order.
    tag = "(Worker_TP{r} pid=7{r}) INFO 03-17 17:07:06 [gpu_model_runner.py:5711] "
    plan = _plan(
        [
            START,
            tag.format(r=1) + "Estimated CUDA graph memory: 4.30 GiB total",
            tag.format(r=0) + "Estimated CUDA graph memory: 4.38 GiB total",
        ]
    )
    assert plan.cuda_graph_estimate_gib == 4.38
    negative = _plan(
        [
            START,
            tag.format(r=1) + "Estimated CUDA graph memory: 0.30 GiB total",
            tag.format(r=0) + "Estimated CUDA graph memory: -0.90 GiB total",
        ]
    )
    assert negative.cuda_graph_estimate_gib == 0.3
    assert negative.anomalies == ["negative CUDA graph memory estimate: -0.9 GiB"]


def test_the_kv_cache_memory_the_free_memory_advice_restates() -> None:
    # vllm#50576 (0.2x, GiB) and 0.11's bytes, after the capture: the phase stays where it is.
    advice = (
        "(Worker_TP0 pid=1222) INFO 08-07 23:22:57 [gpu_worker.py:789] Free memory on device "
        "(46.93/47.4 GiB) on startup. ... Current kv cache memory in use is {}."
    )
    capture = (
        "(EngineCore pid=1) INFO 08-07 23:22:57 [gpu_model_runner.py:6905] Graph capturing "
        "finished in 22 secs, took 2.51 GiB"
    )
    plan = _plan([START, capture, advice.format("1.58 GiB")])
    assert plan.kv_cache_gib == 1.58 and plan.phase == "capturing_cuda_graphs"
    assert _plan([START, advice.format("59212694937 bytes")]).kv_cache_gib == 55.15


def test_v0s_profile_states_the_weights_when_the_load_line_is_not_there() -> None:
    # gateway-api-inference-extension#550 (0.8 V0); the load line, when there, stands.
    summary = (
        "INFO 03-21 20:15:45 [worker.py:267] model weights take 12.55GiB; non_torch_memory takes "
        "0.16GiB; PyTorch activation peak memory takes 2.38GiB; the rest of the memory reserved "
        "for KV Cache is 56.18GiB."
    )
    assert _plan([START, summary]).model_load_gib == 12.55
    load = "INFO 03-21 20:15:10 [model_runner.py:1110] Loading model weights took 12.5523 GB"
    assert _plan([START, load, summary]).model_load_gib == 12.5523


def test_an_eagle_architecture_resolved_is_a_drafter() -> None:
    # speculators#166 (0.11): the EAGLE3 speculator's own config, before its load line.
    line = "INFO 10-30 14:19:22 [model.py:664] Resolved architecture: Eagle3LlamaForCausalLM"
    assert _plan([START, line]).drafter_loaded
    target = "INFO 10-30 14:19:22 [model.py:664] Resolved architecture: LlamaForCausalLM"
    assert not _plan([START, target]).drafter_loaded


def test_an_eagle_vision_target_model_is_no_drafter() -> None:
    # Constructed line: vLLM's "Resolved architecture: %s" (model.py) for nvidia/Eagle2.5-8B, a
    # target model vLLM serves as Eagle2_5_VLForConditionalGeneration (vllm#32456); the
    # speculators' names (EagleLlama..., Eagle3Qwen..., LlamaForCausalLMEagle3, V0's
    # EAGLEModel) still read as drafters.
    line = "INFO 01-16 16:06:02 [model.py:547] Resolved architecture: {}"
    assert not _plan([START, line.format("Eagle2_5_VLForConditionalGeneration")]).drafter_loaded
    for drafter in (
        "EagleLlama4ForCausalLM",
        "Eagle3Qwen2_5vlForCausalLM",
        "LlamaForCausalLMEagle3",
        "Qwen2ForCausalLMEagle",
        "EAGLEModel",
        "MedusaModel",
    ):
        assert _plan([START, line.format(drafter)]).drafter_loaded, drafter


def test_a_rounded_restatement_does_not_replace_the_stated_utilization() -> None:
    # V0's profile prints the utilization with two decimals ("x gpu_memory_utilization
    # (0.90)", real lines in tests/fixtures/real/vllm) and 0.18+'s hint with four: 0.875 in
    # the args (constructed) must stay 0.875, not become the profile's 0.88.
    args = (
        "INFO 12-20 20:25:40 [utils.py:253] non-default args: {'model': 'm', "
        "'gpu_memory_utilization': 0.875}"
    )
    profile = (
        "INFO 12-20 20:25:46 worker.py:241] the current vLLM instance can use total_gpu_memory "
        "(15.77GiB) x gpu_memory_utilization (0.88) = 13.80GiB"
    )
    assert _plan([args, profile]).gpu_memory_utilization == 0.875
    assert _plan([START, profile]).gpu_memory_utilization == 0.88


def test_the_v0_profile_results_line_reads_in_linear_time() -> None:
    # Constructed: a 64 KiB line of "Memory profiling results: " repeated, against a plain
    # line of the same length (no wall-clock limit: the machine is shared).
    def cost(line: str) -> float:
        return fastest(lambda: parse_vllm_log([START, line]))

    size = 65_536
    repeated = ("Memory profiling results: " * (size // 26 + 1))[:size]
    assert cost(repeated) < 5 * cost("x" * size)


def test_the_auto_fitted_max_model_len_is_the_starts() -> None:
    # --max-model-len auto (0.2x): "Using max model len" and the engine line state the model's
    # full length, then the KV cache sizing fits it; the line as vLLM's kv_cache_utils prints
    # it, quoted from a real log in a public repository's notes.
    plan = _plan(
        [
            "(APIServer pid=1) INFO 10-30 14:19:20 [utils.py:253] non-default args: "
            "{'max_model_len': -1}",
            "(APIServer pid=1) INFO 10-30 14:19:22 [model.py:1752] Using max model len 262144",
            "(EngineCore pid=2) INFO 10-30 14:21:02 [kv_cache_utils.py:1305] Auto-fit "
            "max_model_len: reduced from 262144 to 172032 to fit in available GPU memory "
            "(3.01 GiB available for KV cache)",
        ]
    )
    assert plan.max_model_len == 172032


def test_the_kv_cache_memory_kv_cache_memory_reserves() -> None:
    # --kv-cache-memory (0.11+) skips the profile: no "Available KV cache memory" line, only
    # the reservation (as gpu_worker.py prints it; "reserved 4.0 GiB memory for KV Cache as
    # specified by kv_cache_memory_bytes config" quoted from a real log in a public report).
    line = (
        "(EngineCore pid=2) INFO 03-04 10:00:00 [gpu_worker.py:266] Initial free memory 93.52 "
        "GiB, reserved 4.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config "
        "and skipped memory profiling. This does not respect the gpu_memory_utilization config."
    )
    assert _plan([START, line]).kv_cache_gib == 4.0


def test_the_early_v0_engine_line_without_a_version_states_the_config() -> None:
    # vllm#2418 (0.2): "Initializing an LLM engine with config: ..." names no version.
    [log] = [log for log in vllm_logs() if "2418" in log.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert (plan.max_model_len, plan.dtype, plan.tensor_parallel_size) == (4096, "float16", 1)
    assert plan.enforce_eager is False and plan.quantization is None


def test_settings_pasted_after_the_plan_they_were_stamped_before_are_that_starts() -> None:
    # club-3090#652: the KV cache plan (07-09 02:58:11) pasted first, the non-default args
    # (07-09 02:56:25) after it: one start.
    [log] = [log for log in vllm_logs() if "club3090-652" in log.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert (plan.kv_cache_tokens, plan.max_model_len, plan.max_num_seqs) == (569878, 131072, 1)
    assert [p["phase"] for p in plan.phases] == ["profiling"]


def test_a_start_line_stamped_later_or_on_another_day_is_a_new_start() -> None:
    # Constructed from the lines above: the same args a minute after the plan, and on the
    # next day at an earlier hour.
    [log] = [log for log in vllm_logs() if "club3090-652" in log.path.name]
    args = log.lines[-1]
    for stamp in ("07-09 02:59:25", "07-10 02:56:25"):
        later = args.replace("07-09 02:56:25", stamp)
        assert len(parse_vllm_log([*log.lines[:3], later])) == 2
