"""The vLLM log parser scored on real logs from vLLM 0.5 to today, copied from public bug
reports (``tests/fixtures/real/vllm``, each naming its source and what it must yield): the
number of starts, each expected plan field, the outcome and its error, and the hang signals."""

from __future__ import annotations

import re

import pytest

from collector.vllm.log_parser import VllmLogParser
from tests.support.real_corpus import score_plans, vllm_logs

MIN_SCORE = 0.98


def parse(lines: list[str]) -> tuple[list, list[str]]:
    parser = VllmLogParser()
    facts = [fact for line in lines for fact in parser.feed(line)] + parser.finish()
    return parser.plans(), [fact.data["signal"] for fact in facts if fact.kind == "hang_signal"]


def test_the_corpus_is_real_and_spans_versions() -> None:
    logs = vllm_logs()
    assert len(logs) >= 20
    assert all(log.header.get("source", "").startswith("https://") for log in logs)
    versions = {m.group(1) for log in logs if (m := re.match(r"v0\.(\d+x?)", log.path.name))}
    assert {"5", "6", "7", "8", "9", "10", "11", "12", "15", "23", "2x"} <= versions  # 2x: 0.20 on
    outcomes = {p.get("outcome") for log in logs for p in log.expect.get("plans", [])}
    assert {"started", "failed", "crashed", "incomplete"} <= outcomes
    assert any(log.expect.get("hang_signals") for log in logs)


def test_every_expected_field_outcome_and_hang_signal() -> None:
    score = score_plans(vllm_logs(), parse)
    assert score.recall >= MIN_SCORE, "\n".join(score.misses)


def test_tensor_parallel_ranks_plan_with_the_smallest_rank() -> None:
    [log] = [log for log in vllm_logs() if "27313" in log.path.name]
    [plan] = parse(log.lines)[0]
    assert plan.kv_cache_gib == 11.17 and plan.kv_cache_tokens == 162704


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        # The API server's non-default args (0.8+)
        ("v0.22-spark-272-gb10-nvfp4-banner-args", "max_num_seqs", 4),
        ("v0.22-spark-272-gb10-nvfp4-banner-args", "kv_cache_dtype", "fp8"),
        ("v0.22-spark-272-gb10-nvfp4-banner-args", "attention_backend", None),  # a moe_backend
        ("v0.22-spark-272-gb10-nvfp4-banner-args", "speculative_method", None),
        ("v0.23-spark-296-logo-dflash-args", "max_num_batched_tokens", 16384),
        ("v0.23-spark-296-logo-dflash-args", "attention_backend", "FLASH_ATTN"),  # 'flash_attn'
        ("v0.23-spark-296-logo-dflash-args", "speculative_method", "dflash"),
        ("v0.23-spark-296-logo-dflash-args", "num_speculative_tokens", 5),
        # "Chunked prefill is enabled with max_num_batched_tokens=2048."
        ("v0.10.2-vllm-24162-tp2-start", "enable_chunked_prefill", True),
        ("v0.10.2-vllm-24162-tp2-start", "max_num_batched_tokens", 2048),
        # The engine's config line: chunked_prefill_enabled, enable_prefix_caching (None says
        # nothing), kv_cache_dtype=auto (a setting), speculative_config=None (none)
        ("v0.8.2-windows-6-v0-engine", "enable_chunked_prefill", False),
        ("v0.8.2-windows-6-v0-engine", "enable_prefix_caching", None),
        ("v0.8.2-windows-6-v0-engine", "kv_cache_dtype", "auto"),
        ("v0.8-versions-v0-engine-lines", "enable_prefix_caching", False),
        ("v0.8-versions-v0-engine-lines", "kv_cache_dtype", "auto"),
        ("v0.6.1-torchserve-3343-engine-config", "kv_cache_dtype", "auto"),
        ("v0.10.0-ascend-2416-v1-engine-config", "kv_cache_dtype", "auto"),
        ("v0.10.0-ascend-2416-v1-engine-config", "speculative_method", None),
        # ... wrapped by the paste: the fields on its continuation line (vllm#12529 cut a
        # field's name in two: "chunk" | "ed_prefill_enabled=True")
        ("v0.10.0-ascend-2416-v1-engine-config", "enable_prefix_caching", True),
        ("v0.10.0-ascend-2416-v1-engine-config", "enable_chunked_prefill", True),
        ("v0.6.1-torchserve-3343-engine-config", "enable_prefix_caching", False),
        ("v0.8-versions-v0-engine-lines", "enable_chunked_prefill", True),
        # The attention backend's selection line, in each version's words
        ("v0.5-vllm-6768-medusa-v0-spec-blocks", "attention_backend", "XFORMERS"),
        ("v0.10-vllm-25340-gguf", "attention_backend", "FLASH_ATTN"),  # "Flash Attention"
        ("v0.11-gpustack-3098-dp0", "attention_backend", "FLASH_ATTN"),
        # not the MoE's "Using FlashInfer MXFP4 BF16 backend" on the next line
        ("vllm-31740-gb10-gpt-oss-120b-loading", "attention_backend", "TRITON_ATTN"),
        # The selection line before the line the capture's start opens on (a load, a drafter)
        ("v0.7-rlswarm-92-dash-prefixed", "attention_backend", "FLASH_ATTN"),
        ("v0.10-vllm-21728-full-plan", "attention_backend", "FLASH_ATTN"),
        ("v0.2x-vllm-46249-mtp-tp4-drafter", "attention_backend", "FLASH_ATTN"),
        # 0.20's enum-named selection line; the args' 'flash_attn' is inside the speculative
        # config (the DFlash drafter's own backend), not the server's
        ("v0.20-spark-hijinks-gemma4-nvfp4-dflash-15-started", "attention_backend", "TRITON_ATTN"),
        ("v0.20-spark-hijinks-gemma4-nvfp4-dflash-15-started", "speculative_method", "dflash"),
        # Gemma 4's config forcing a backend, the start failing before any selection line
        ("v0.20-spark-hijinks-gemma4-chunked-mm-budget-failed", "attention_backend", "TRITON_ATTN"),
        # ROCm's "Using Triton Attention backend on V1 engine."
        (
            "v0.14-apollo-rocm-offline-fp8-inductor-hip-oom-failed",
            "attention_backend",
            "TRITON_ATTN",
        ),
    ],
)
def test_serving_configuration_fields(name: str, field: str, value: object) -> None:
    [log] = [log for log in vllm_logs() if log.path.stem == name]
    [plan] = parse(log.lines)[0]
    assert getattr(plan, field) == value


@pytest.mark.parametrize(
    ("name", "outcome", "error_start"),
    [
        # The capture begins at the engine's OOM; the output handler failing after it says the
        # engine died serving: a crash, with the OOM as its error (not a failed start).
        ("club3090-16-oom-while-serving", "crashed", "(EngineCore pid=112) ERROR 05-01 14:39:06"),
        # A Buildkite page's "  | " gutter and its stamp are peeled off the error.
        ("vllm-14574-buildkite-gutter-engine-hit-exception", "failed", "ERROR 03-10 08:07:20"),
        # The journal's "[host] docker[pid]: " is no part of the error; vLLM's own tags are.
        ("aeon-16-gb10-journald-engine-dead", "crashed", "(APIServer pid=1) ERROR 06-21 19:23:33"),
        ("v0.10.2-vllm-25148-ray-nested-tag-failed", "failed", "(EngineCore_DP0 pid=16862) ERROR"),
        # 0.7-0.8's "EngineCore hit an exception" opening the capture: its traceback's busy-loop
        # frames say the engine died serving (the Buildkite one above, in its startup, failed)
        ("v0.8-vllm-14765-v1-ngram-engine-hit-exception-bare", "crashed", "ERROR 03-13 11:26:04"),
        # A worker dying, then "EngineCore failed to start": the start failed, of the custom
        # all-reduce's CUDA fault printed bare before
        ("v0.2x-1cat-539-pp2-custom-allreduce-ima-failed", "failed", "Failed: Cuda error /work"),
        # V0's API server finding its engine process gone (CRITICAL, launcher.py), after serving
        ("v0.7.2-vllm-13939-v0-stats-then-mqllmengine-dead-critical", "crashed", "CRITICAL 02-25"),
    ],
)
def test_outcome_and_error_of(name: str, outcome: str, error_start: str) -> None:
    [log] = [log for log in vllm_logs() if log.path.stem == name]
    [plan] = parse(log.lines)[0]
    assert plan.outcome == outcome
    assert plan.error is not None and plan.error.startswith(error_start)


def test_a_late_worker_line_does_not_reopen_a_failed_start() -> None:
    # Ray delivers a worker's KV line (logged a second earlier) inside the engine's traceback:
    # the start stays failed, not back to profiling (a host shown as still starting).
    [log] = [log for log in vllm_logs() if "30017" in log.path.name]
    [plan] = parse(log.lines)[0]
    assert plan.kv_cache_gib == 26.98
    assert [p["phase"] for p in plan.phases] == ["failed"]
