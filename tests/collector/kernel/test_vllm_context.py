"""Kernel events put in vLLM's context: the phase in force and the nearest vLLM line."""

from __future__ import annotations

from collector.kernel.vllm_context import PhaseEntry, nearest_line, phase_at

LINES = [
    (100.0, "Loading weights took 126.18 seconds"),
    (100.5, "Loading drafter model..."),
    (110.0, "Model loading took 23.43 GiB memory and 146.682945 seconds"),
]
PHASES = [
    PhaseEntry(50.0, "loading_weights", 4),
    PhaseEntry(100.5, "loading_drafter", 6),
    PhaseEntry(120.0, "profiling", 9),
]


def test_event_during_drafter_load() -> None:
    assert phase_at(101.2, PHASES) == PHASES[1]
    assert nearest_line(101.2, LINES) == (100.5, "Loading drafter model...")


def test_no_line_within_window() -> None:
    assert phase_at(105.0, PHASES) == PHASES[1]
    assert nearest_line(105.0, LINES) is None


def test_before_any_phase() -> None:
    assert phase_at(10.0, PHASES) is None
    assert nearest_line(10.0, LINES) is None


def test_a_phase_read_a_moment_late_counts_when_it_is_closer() -> None:
    # "Loading drafter model..." stamped 0.3 s after the fault: the fault belongs to it.
    assert phase_at(100.2, PHASES) == PHASES[1]
    assert phase_at(119.7, PHASES) == PHASES[2]
    # A fault just after the drafter load began does not belong to a profiling read 0.3 s on.
    close = [PHASES[1], PhaseEntry(100.9, "profiling", 7)]
    assert phase_at(100.6, close) == PHASES[1]


def test_tie_goes_to_the_earlier_line() -> None:
    assert nearest_line(100.25, LINES) == (100.0, "Loading weights took 126.18 seconds")
