"""Kernel events put in vLLM's context: the phase in force and the nearest vLLM line."""

from __future__ import annotations

from types import SimpleNamespace

from collector.kernel.vllm_context import PhaseEntry, context_line, nearest_line, phase_at

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


def rows(lines: list[tuple[float, str]], first_id: int = 5) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(id=first_id + i, ts=ts, text=text) for i, (ts, text) in enumerate(lines)
    ]


def test_the_line_shown_agrees_with_a_phase_read_a_moment_late() -> None:
    # The fault at 100.45: the weights line was read at once (100.4), the drafter line that
    # vLLM printed just before the fault was read late (100.6, on a loaded machine). The lag
    # rule puts the fault in the drafter load; the line shown is the one that began it.
    near = rows([(100.4, "Loading weights took 0.40 seconds"), (100.6, "Loading drafter model...")])
    entered = phase_at(
        100.45, [PhaseEntry(50.0, "loading_weights", 4), PhaseEntry(100.6, "loading_drafter", 6)]
    )
    assert entered is not None and entered.phase == "loading_drafter"
    assert context_line(100.45, entered, near).text == "Loading drafter model..."


def test_otherwise_the_nearest_line_and_on_a_tie_the_one_that_entered_the_phase() -> None:
    near = rows(
        [(100.0, "Loading weights took 126.18 seconds"), (100.5, "Loading drafter model...")]
    )
    assert context_line(101.2, PHASES[1], near).text == "Loading drafter model..."
    tied = rows([(100.5, "Loading weights took 0.40 seconds"), (100.5, "Loading drafter model...")])
    assert context_line(100.5, PhaseEntry(100.5, "loading_drafter", 6), tied).id == 6
    assert context_line(105.0, PHASES[1], near) is None
