"""Kernel events put in vLLM's context."""

from __future__ import annotations

from collector.services.correlate import nearest_vllm_context

LINES = [
    (100.0, "Loading weights took 126.18 seconds"),
    (100.5, "Loading drafter model..."),
    (110.0, "Model loading took 23.43 GiB memory and 146.682945 seconds"),
]
PHASES = [
    {"phase": "loading_weights", "ts": 50.0, "line_no": 4},
    {"phase": "loading_drafter", "ts": 100.5, "line_no": 6},
    {"phase": "profiling", "ts": 120.0, "line_no": 9},
]


def test_event_during_drafter_load() -> None:
    phase, line = nearest_vllm_context(101.2, LINES, PHASES)
    assert phase == "loading_drafter"
    assert line == (100.5, "Loading drafter model...")


def test_no_line_within_window() -> None:
    assert nearest_vllm_context(105.0, LINES, PHASES) == ("loading_drafter", None)


def test_before_any_phase_and_tuple_phases() -> None:
    assert nearest_vllm_context(10.0, LINES, [(50.0, "loading_weights")]) == (None, None)
    assert nearest_vllm_context(60.0, [], [(50.0, "loading_weights")]) == ("loading_weights", None)
