"""bench/wakeup.py reads a real thread's CPU per wake-up."""

from __future__ import annotations

import time

from bench import wakeup


def test_a_waiting_thread_costs_cpu_per_wake_and_a_busy_one_far_more() -> None:
    idle = wakeup.cpu_per_wake_us(lambda p: p.poll(1), 0.001, 0.3)

    def spin(_poller: object) -> None:  # each "wait" burns 2 ms of CPU instead
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass

    busy = wakeup.cpu_per_wake_us(spin, 0.002, 0.3)
    assert idle > 0
    assert busy >= 1900  # the spin's own 2 ms, counted from schedstat
    assert busy > idle
