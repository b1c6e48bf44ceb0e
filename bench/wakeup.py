"""The CPU one thread spends each time it wakes from a wait, on this machine.

The floor under the agent's cost per kernel line: a line wakes its reader, the shipper, and
the shipper again when the collector answers. A thread here does nothing but wait (``poll`` on
a pipe nobody writes, or ``sleep``) for a given time, in a loop, and its CPU time is read
from ``/proc/self/task/<tid>/schedstat`` (nanoseconds on the CPU). On a VM a wake-up costs
far more than on bare metal, and most of it is outside the process.

    python bench/wakeup.py [--seconds 3]

The last line is JSON: microseconds of CPU per wake-up for each kind of wait.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

# (name, seconds each wait lasts, the wait)
WAITS: list[tuple[str, float, Callable[[select.poll], object]]] = [
    ("poll_100ms", 0.1, lambda p: p.poll(100)),
    ("sleep_100ms", 0.1, lambda _p: time.sleep(0.1)),
    ("poll_10ms", 0.01, lambda p: p.poll(10)),
    ("sleep_1ms", 0.001, lambda _p: time.sleep(0.001)),
]


def thread_cpu_ns(tid: int) -> int:
    return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])


def cpu_per_wake_us(wait: Callable[[select.poll], object], every_s: float, seconds: float) -> float:
    """CPU microseconds per wake-up of a thread that does nothing but ``wait``."""
    read_end, write_end = os.pipe()
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    stop = threading.Event()
    wakes = [0]

    def loop() -> None:
        while not stop.is_set():
            wait(poller)
            wakes[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    time.sleep(min(0.2, 10 * every_s))  # its first waits: start-up, not measured
    assert thread.native_id is not None
    cpu0, wakes0 = thread_cpu_ns(thread.native_id), wakes[0]
    time.sleep(seconds)
    cpu1, wakes1 = thread_cpu_ns(thread.native_id), wakes[0]
    stop.set()
    thread.join()
    os.close(read_end)
    os.close(write_end)
    return (cpu1 - cpu0) / 1000.0 / max(1, wakes1 - wakes0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured per kind of wait")
    args = parser.parse_args()
    figures = {}
    for name, every_s, wait in WAITS:
        figures[name] = round(cpu_per_wake_us(wait, every_s, args.seconds), 1)
        print(f"{name}: {figures[name]} µs of CPU per wake-up", flush=True)
    print(json.dumps({"cpu_us_per_wake": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
