"""The serving configuration a profile's args ask for, against what vLLM's log states, and how
the summary and the Markdown report compare profiles by it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from collector.matrix import served
from collector.matrix.presets import QWEN_BASE_ARGS
from collector.matrix.report import render_markdown
from collector.matrix.results import STARTUP_PLAN_KEYS, MatrixReport, ProfileReport
from collector.matrix.served import CONFIG_KEYS, config_mismatch, requested_config, shown_keys
from collector.matrix.summary import summarize
from collector.matrix.summary_report import config_value
from collector.vllm.log_config import config_fields
from collector.vllm.plan import StartupPlan
from tests.support.real_corpus import vllm_logs

SERVE = ["vllm", "serve", "nvidia/Qwen3-NVFP4"]


def test_the_plan_keys_carry_every_configuration_field_the_parser_reads() -> None:
    assert set(CONFIG_KEYS) <= set(STARTUP_PLAN_KEYS)
    assert all(hasattr(StartupPlan(), key) for key in STARTUP_PLAN_KEYS)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--gpu-memory-utilization", "0.9"], {"gpu_memory_utilization": 0.9}),
        # argparse keeps the last value, as vLLM does
        (
            ["--gpu-memory-utilization", "0.9", "--gpu_memory_utilization=0.85"],
            {"gpu_memory_utilization": 0.85},
        ),
        (["-tp", "2", "-pp", "1"], {"tensor_parallel_size": 2, "pipeline_parallel_size": 1}),
        (["--max-model-len", "32k"], {"max_model_len": 32_000}),
        (["--max-model-len", "32K"], {"max_model_len": 32_768}),
        (["--max-model-len", "-1"], {"max_model_len": "auto"}),
        (["--dtype", "half", "--kv-cache-dtype", "auto"],
         {"dtype": "float16", "kv_cache_dtype": "auto"}),
        (["--enforce-eager", "--max-num-seqs", "4"], {"enforce_eager": True, "max_num_seqs": 4}),
        (["--no-enforce-eager"], {"enforce_eager": False}),
        (["--max-num-batched-tokens", "8k", "--enable-chunked-prefill",
          "--no-enable-prefix-caching"],
         {"max_num_batched_tokens": 8000, "enable_chunked_prefill": True,
          "enable_prefix_caching": False}),
        # older vLLM's optional value
        (["--enable-chunked-prefill", "False"], {"enable_chunked_prefill": False}),
        # the name vLLM's selection line prints
        (["--attention-backend", "flashinfer"], {"attention_backend": "FLASHINFER"}),
        (["--speculative-config", '{"method":"mtp","num_speculative_tokens":3,"moe_backend":"x"}'],
         {"speculative_method": "mtp", "num_speculative_tokens": 3}),
        # a later config replaces the whole of the earlier one; one that is not JSON says nothing
        (["-sc", '{"method":"ngram","num_speculative_tokens":4}',
          "--speculative_config", '{"model":"d"}'], {}),
        (["--speculative-config", "mtp"], {}),
        (["-q", "awq"], {"quantization": "awq"}),
        (["--served-model-name", "m"], {}),
    ],
)  # fmt: skip
def test_what_the_args_ask_for(args: list[str], expected: dict[str, Any]) -> None:
    assert requested_config([*SERVE, *args]) == expected


def test_a_difference_is_where_the_log_states_another_value_than_a_concrete_ask() -> None:
    asked = requested_config(
        [*SERVE, "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "auto", "-q", "awq",
         "--dtype", "half", "--max-model-len", "8192", "--enforce-eager"]
    )  # fmt: skip
    plan = {
        "gpu_memory_utilization": 0.85,  # a wrapper pinned its own
        "kv_cache_dtype": "fp8",  # auto: vLLM's choice, no difference
        "quantization": "awq_marlin",  # vLLM chose the kernel
        "dtype": "float16",  # half is float16
        "max_model_len": None,  # the log did not say
        "enforce_eager": True,
    }
    assert config_mismatch(asked, plan) == {
        "gpu_memory_utilization": {"requested": 0.9, "reported": 0.85},
        "quantization": {"requested": "awq", "reported": "awq_marlin"},
    }
    assert config_mismatch({"gpu_memory_utilization": 0.9}, {"gpu_memory_utilization": 0.9}) == {}
    # A start that failed before its engine line: its args line states the user's own "half".
    said = config_fields("non-default args: {'model': 'm', 'dtype': 'half'}")
    assert said == {"dtype": "float16"}
    assert config_mismatch(requested_config([*SERVE, "--dtype", "half"]), said) == {}


def test_the_preset_asks_for_every_field_but_eager_through_a_flag_the_plan_knows() -> None:
    asked = requested_config(QWEN_BASE_ARGS)
    assert set(asked) == set(CONFIG_KEYS) - {"enforce_eager"}
    assert (asked["attention_backend"], asked["speculative_method"]) == ("FLASHINFER", "mtp")


def test_kv_cache_dtype_auto_is_stated_and_compared_where_the_spec_asks_another() -> None:
    # The engine line's kv_cache_dtype=auto is a value: a wrapper's auto where the spec asked
    # for fp8 is a difference; an ask of auto is still vLLM's to resolve (a checkpoint's fp8).
    [log] = [log for log in vllm_logs() if log.path.stem == "v0.8.2-windows-6-v0-engine"]
    [engine_line] = [line for line in log.lines if "with config: " in line]
    said = config_fields(engine_line)
    assert (said["dtype"], said["kv_cache_dtype"]) == ("float32", "auto")
    fp8 = requested_config([*SERVE, "--kv-cache-dtype", "fp8"])
    assert config_mismatch(fp8, said) == {
        "kv_cache_dtype": {"requested": "fp8", "reported": "auto"}
    }
    auto = requested_config([*SERVE, "--kv-cache-dtype", "auto"])
    assert config_mismatch(auto, said) == config_mismatch(auto, {"kv_cache_dtype": "fp8"}) == {}


def test_the_attention_backend_compares_by_name_whatever_the_case() -> None:
    asked = requested_config([*SERVE, "--attention-backend", "flash_attn"])
    assert config_mismatch(asked, {"attention_backend": "FLASH_ATTN"}) == {}
    assert config_mismatch(asked, {"attention_backend": "TRITON_ATTN"}) == {
        "attention_backend": {"requested": "FLASH_ATTN", "reported": "TRITON_ATTN"}
    }


def _rep(profile: str, repetition: int = 1, **plan: Any) -> ProfileReport:
    requested = plan.pop("requested", {})
    full = {"kv_cache_gib": 50.0, **plan}
    return ProfileReport(
        profile=profile,
        repetition=repetition,
        startup={"outcome": "ok", "duration_s": 100.0},
        startup_plan=full,
        requested=requested,
        config_mismatch=config_mismatch(requested, full),
    )


def test_the_summary_states_each_profiles_configuration_and_its_difference_to_the_baseline() -> (
    None
):
    reps = [
        _rep("A", 1, kv_cache_dtype=None, max_model_len=262144, gpu_memory_utilization=0.7),
        _rep("B", 1, kv_cache_dtype="fp8", max_model_len=262144, gpu_memory_utilization=0.6,
             requested={"gpu_memory_utilization": 0.7, "kv_cache_dtype": "fp8"}),
        _rep("A", 2, kv_cache_dtype=None, max_model_len=262144, gpu_memory_utilization=0.7),
        _rep("B", 2, kv_cache_dtype="fp8", max_model_len=262144, gpu_memory_utilization=0.7,
             requested={"gpu_memory_utilization": 0.7, "kv_cache_dtype": "fp8"}),
    ]  # fmt: skip
    summary = summarize(reps, ["A", "B"])
    a, b = summary["profiles"]
    assert a["config"] == {"max_model_len": [262144], "gpu_memory_utilization": [0.7]}
    assert a["config_mismatch"] == {}
    assert b["config"]["gpu_memory_utilization"] == [0.6, 0.7]  # the repetitions disagreed
    assert b["config_mismatch"] == {"gpu_memory_utilization": {"k": 1, "n": 2}}
    (vs,) = summary["comparisons"]
    # kv_cache_dtype: A's log did not state one, so nothing to compare against.
    assert vs["config"] == {"gpu_memory_utilization": {"value": [0.6, 0.7], "baseline": [0.7]}}
    md = render_markdown(MatrixReport(name="m", host="h", profiles=reps, summary=summary))
    assert "| B | gpu_memory_utilization | 0.6 or 0.7 vs 0.7 (vLLM's log) |" in md
    # One way to print a stated value, in the comparisons as in the configuration table.
    assert [config_value(v) for v in (131072, 0.85, True, "fp8")] == [
        "131,072",
        "0.85",
        "yes",
        "fp8",
    ]


def test_the_report_shows_vllms_values_and_the_spec_where_they_differ() -> None:
    reps = [
        _rep("A", max_model_len=262144, gpu_memory_utilization=0.7, dtype="bfloat16"),
        _rep("B", max_model_len=131072, gpu_memory_utilization=0.6, dtype="bfloat16",
             enforce_eager=True,
             requested={"max_model_len": 131072, "gpu_memory_utilization": 0.7,
                        "quantization": "fp8"}),
    ]  # fmt: skip
    assert shown_keys(reps) == [
        "max_model_len",
        "gpu_memory_utilization",
        "dtype",
        "quantization",
        "enforce_eager",
    ]
    md = render_markdown(MatrixReport(name="m", host="h", profiles=reps))
    section = md.split("### Serving configuration (as vLLM's log states it)\n\n")[1]
    assert section.splitlines()[:4] == [
        "| Profile | Max model len | GPU memory util. | dtype | Quantization | Eager |",
        "|---|---|---|---|---|---|",
        "| A | 262,144 | 0.7 | bfloat16 | — | — |",
        "| B | 131,072 | 0.6 (spec: 0.7) | bfloat16 | — (spec: fp8) | yes |",
    ]
    assert "Serving configuration" not in render_markdown(
        MatrixReport(name="m", host="h", profiles=[_rep("A")])
    )


def test_the_run_page_labels_the_fields_as_the_report_does() -> None:
    """served.js draws the same columns as the Markdown report: its LABELS, in order."""
    script = (Path(served.__file__).parent.parent / "static" / "js" / "served.js").read_text()
    block = script.split("const LABELS = {", 1)[1].split("};", 1)[0]
    labels = dict(re.findall(r'(\w+): "([^"]*)"', block))
    assert list(labels.items()) == list(served.LABELS.items())
