"""Hang verdicts from metrics samples: running requests with a frozen generation counter."""

from __future__ import annotations

from collector.vllm.hang import HangDetector


def test_hung_once_then_resumed_once() -> None:
    d = HangDetector(stall_s=15.0)
    assert d.observe(100.0, running=1, generation_tokens=500) is None
    assert d.observe(105.0, running=1, generation_tokens=520) is None  # progress at 105
    assert d.observe(115.0, running=1, generation_tokens=520, power_w=40) is None
    hung = d.observe(120.0, running=1, generation_tokens=520, power_w=18.5)
    assert hung is not None
    assert (hung.kind, hung.since, hung.for_s, hung.low_power) == ("vllm_hung", 105.0, 15.0, True)
    assert d.observe(125.0, running=1, generation_tokens=520) is None  # one verdict only
    resumed = d.observe(130.0, running=1, generation_tokens=530)
    assert resumed is not None
    assert (resumed.kind, resumed.since, resumed.for_s) == ("vllm_resumed", 105.0, 25.0)
    assert not d.hung


def test_idle_server_is_not_hung() -> None:
    d = HangDetector(stall_s=15.0)
    for ts in range(0, 100, 5):
        assert d.observe(float(ts), running=0, generation_tokens=42) is None


def test_high_power_hang_is_not_low_power() -> None:
    d = HangDetector(stall_s=10.0)
    d.observe(0.0, running=2, generation_tokens=1)
    verdict = d.observe(10.0, running=2, generation_tokens=1, power_w=45.0)
    assert verdict is not None and verdict.kind == "vllm_hung" and not verdict.low_power


def test_queue_drained_clears_hang() -> None:
    d = HangDetector(stall_s=5.0)
    d.observe(0.0, running=1, generation_tokens=7)
    assert d.observe(6.0, running=1, generation_tokens=7) is not None
    cleared = d.observe(7.0, running=0, generation_tokens=7)
    assert cleared is not None and cleared.kind == "vllm_resumed"


def test_a_long_chunked_prefill_is_work_not_a_hang() -> None:
    # vLLM emits no token until the prefill of a long prompt ends; each engine step still fills
    # more KV cache and adds to the per-step token histogram.
    d = HangDetector(stall_s=15.0)
    for i in range(60):
        verdict = d.observe(
            float(i),
            running=1,
            generation_tokens=500,
            kv_usage=0.10 + i * 0.01,
            iteration_tokens=8192.0 * i,
        )
        assert verdict is None
    # Once the prefill's steps stop too, it is a hang.
    for i in range(60, 80):
        verdict = d.observe(
            float(i), running=1, generation_tokens=500, kv_usage=0.69, iteration_tokens=8192 * 59
        )
        if verdict is not None:
            break
    assert verdict is not None and (verdict.kind, verdict.since) == ("vllm_hung", 59.0)


def test_requests_only_waiting_while_nothing_moves_is_a_hang() -> None:
    d = HangDetector(stall_s=10.0)
    assert d.observe(0.0, running=0, generation_tokens=42, waiting=3, kv_usage=0.0) is None
    verdict = d.observe(10.0, running=0, generation_tokens=42, waiting=3, kv_usage=0.0)
    assert verdict is not None
    assert (verdict.kind, verdict.reason, verdict.waiting) == ("vllm_hung", "waiting", 3)
    resumed = d.observe(11.0, running=1, generation_tokens=43, waiting=2, kv_usage=0.01)
    assert resumed is not None and resumed.kind == "vllm_resumed"


def test_prompt_tokens_moving_is_progress() -> None:
    d = HangDetector(stall_s=5.0)
    for i in range(20):
        assert d.observe(float(i), running=1, generation_tokens=7, prompt_tokens=100 * i) is None
