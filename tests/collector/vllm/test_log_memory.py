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
