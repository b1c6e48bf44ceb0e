"""The agent's clock offset from each batch's ``sent_at``: a reading is the offset plus the
batch's time in transit, so delays must not move it, while real clock steps must."""

from __future__ import annotations

import pytest

from collector.liveness.heartbeat import measured_offset
from collector.readback.timebase import SKEW_MIN_S


def follow(offset: float | None, readings: list[float]) -> float | None:
    for reading in readings:
        offset = measured_offset(offset, received_at=1000.0 + reading, sent_at=1000.0)
    return offset


def test_the_first_reading_is_taken_and_jitter_stays_near_the_lowest() -> None:
    assert follow(None, [0.012]) == 0.012
    settled = follow(None, [0.01, 0.03, 0.011, 0.05, 0.012, 0.02])
    assert settled is not None and 0.01 <= settled < 0.02


@pytest.mark.parametrize("delay", [3.0, 8.0, 15.0])
def test_a_batch_held_up_for_seconds_stays_below_the_correction_threshold(delay: float) -> None:
    held = follow(0.01, [delay])
    assert held is not None and abs(held) < SKEW_MIN_S
    assert follow(held, [0.02]) == 0.02  # the next batch on time: back at once


def test_an_agent_clock_stepped_forward_is_taken_at_once() -> None:
    assert follow(0.01, [-3600.0]) == -3600.0


def test_an_agent_clock_stepped_back_is_followed_within_thirty_batches() -> None:
    assert follow(0.01, [60.0]) == pytest.approx(6.009)  # one batch: a tenth of the way
    offset = follow(0.01, [60.0] * 30)
    assert offset is not None and 57.0 < offset <= 60.0
