"""bench/agent_wakeups.py reads a process's threads from schedstat and diffs them."""

from __future__ import annotations

import os
import threading
import time

from bench import agent_wakeups


def test_each_thread_is_read_and_a_busy_one_comes_first() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            end = time.thread_time() + 0.005
            while time.thread_time() < end:
                pass
            time.sleep(0.001)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        before = agent_wakeups.threads(os.getpid())
        time.sleep(0.3)
        after = agent_wakeups.threads(os.getpid())
    finally:
        stop.set()
        thread.join()
    assert str(thread.native_id) in after and str(os.getpid()) in after
    rows = agent_wakeups.per_thread(before, after, 0.3)
    busiest_ms, busiest_wakes = rows[0]
    spun = (after[str(thread.native_id)][0] - before[str(thread.native_id)][0]) / 1e6 / 0.3
    assert busiest_ms >= spun > 0 and busiest_wakes > 0


def test_a_thread_that_began_in_the_window_counts_from_zero() -> None:
    rows = agent_wakeups.per_thread(
        {"1": (1_000_000, 10)}, {"1": (3_000_000, 30), "2": (500_000, 5)}, 2.0
    )
    assert rows == [(1.0, 10.0), (0.25, 2.5)]
