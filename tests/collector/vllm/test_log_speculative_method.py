"""The speculative method a start's args leave to vLLM: vLLM names it from the drafter's model
(``SpeculativeConfig.__post_init__``: "eagle-", then "eagle3", then "dflash" in the name)."""

from __future__ import annotations

import pytest

from collector.vllm.log_config import config_fields
from collector.vllm.log_parser import parse_vllm_log
from tests.support.real_corpus import vllm_logs


def test_a_dflash_drafter_named_so_is_dflash_before_the_engine_says_it() -> None:
    # sostrowsk/dgx-spark-local-llm: the log ends before the engine's config line; the args
    # name the drafter poolside/Laguna-S-2.1-DFlash-NVFP4 and no method.
    [log] = [log for log in vllm_logs() if "laguna-nvfp4-dflash-log-ends-at-args" in log.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert (plan.speculative_method, plan.num_speculative_tokens) == ("dflash", 15)


# Constructed: the args' speculative config as vLLM prints it, with drafters named as vLLM's
# own examples are (yuhuili/EAGLE-LLaMA3-Instruct-8B, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B).
_ARGS = (
    "non-default args: {'model': 'm', "
    "'speculative_config': {'model': '%s', 'num_speculative_tokens': 3}}"
)


@pytest.mark.parametrize(
    ("drafter", "method"),
    [
        ("yuhuili/EAGLE-LLaMA3-Instruct-8B", "eagle"),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
        ("AngelSlim/Qwen3-8B_eagle3", "eagle3"),
        ("z-lab/Qwen3.6-35B-A3B-DFlash", "dflash"),
        ("Qwen/Qwen3-0.6B", None),  # a draft model: vLLM reads its config, the log does not
    ],
)
def test_the_method_vllm_names_from_the_drafters_model(drafter: str, method: str | None) -> None:
    assert config_fields(_ARGS % drafter).get("speculative_method") == method


def test_a_method_stated_stays() -> None:
    line = _ARGS % "x/EAGLE3-y', 'method': 'mtp"
    assert config_fields(line)["speculative_method"] == "mtp"
