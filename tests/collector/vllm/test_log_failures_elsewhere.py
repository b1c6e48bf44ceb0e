"""How a start fails in the words other platforms, shells and vLLM's own typos give it: read
from real logs in other projects' trackers (``tests/fixtures/real/vllm``)."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from tests.support.real_corpus import vllm_logs


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
