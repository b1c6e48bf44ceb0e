"""The agent's CPU and wake-ups, per thread, at 10 kernel lines/s and a 1 s interval.

A real collector (SQLite) and a real agent process reading the real ``/dev/kmsg`` (root: the
bench sets ``printk_devkmsg`` to ``on`` for the run and restores it), or a kmsg file where the
device cannot be written and read back here; the bench writes a record every 100 ms. Each of
the agent's threads is read from ``/proc/<pid>/task/<tid>/schedstat`` (CPU nanoseconds, times
it was scheduled in) over the window, after a warm-up: where the CPU of a line goes, and how
many times a line wakes the agent (each wake-up costs CPU by itself, ``bench/wakeup.py``).

``--vs DIR``: another checkout's agent reads the same records beside this one, into the same
collector (as its own host): the two see the same minutes of a noisy machine.

    python bench/agent_wakeups.py [--seconds 40] [--rate 10] [--vs DIR]

The last line is JSON: ``cpu_pct`` and ``wakeups_per_s`` (with ``--vs``, also ``baseline_*``
and ``cpu_ratio``, this ÷ that) and ``kmsg_mode`` (``device`` or ``file``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, add_host, free_port, spawn_collector, start_agent, wait_collector
from bench._peers_kmsg import DEVICE, Writer, device_usable, devkmsg_on

WARMUP_S = 8.0
Threads = dict[str, tuple[int, int]]  # tid -> (CPU ns, times scheduled in)


def threads(pid: int) -> Threads:
    found: Threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            cpu, _wait, runs = (task / "schedstat").read_text().split()
            found[task.name] = (int(cpu), int(runs))
    return found


def per_thread(before: Threads, after: Threads, seconds: float) -> list[tuple[float, float]]:
    """(CPU ms a second, wake-ups a second) of each thread, busiest first."""
    rows = []
    for tid, (cpu, runs) in after.items():
        cpu0, runs0 = before.get(tid, (0, 0))
        rows.append(((cpu - cpu0) / 1e6 / seconds, (runs - runs0) / seconds))
    return sorted(rows, reverse=True)


def measure(
    roots: list[Path], seconds: float, rate: float, device: bool
) -> list[list[tuple[float, float]]]:
    """Per agent (one per checkout in ``roots``), its threads' rows (``per_thread``)."""
    work = Path(tempfile.mkdtemp(prefix="fw-wakeups-"))
    kmsg = DEVICE if device else work / "kmsg"
    if not device:
        kmsg.touch()
    db_url = f"sqlite:///{work / 'fw.db'}"
    port = free_port()
    procs = [spawn_collector(db_url, port, work / "collector.log", FREEZEWATCH_BIND="127.0.0.1")]
    try:
        wait_collector(procs[0], port, work / "collector.log")
        url = f"http://127.0.0.1:{port}"
        agents = []
        for i, root in enumerate(roots):
            token = add_host(db_url, f"agent-{i}")
            extra = ("--proc-root", "/proc")
            agent = start_agent(url, token, f"agent-{i}", work / f"agent-{i}", kmsg=kmsg,
                                extra=extra, root=root)  # fmt: skip
            procs.append(agent)
            agents.append(agent)
        with devkmsg_on() if device else contextlib.nullcontext():
            writer = Writer(kmsg)
            start, k, before, began = time.monotonic(), 0, None, 0.0
            while (now := time.monotonic()) < start + WARMUP_S + seconds:
                if before is None and now >= start + WARMUP_S:
                    before, began = [threads(a.pid) for a in agents], now
                writer.write(f"freezewatch-bench wakeups line {k} " + "x" * 60)
                k += 1
                time.sleep(max(0.0, start + k / rate - time.monotonic()))
            after, took = [threads(a.pid) for a in agents], time.monotonic() - began
            writer.close()
        assert before is not None
        return [per_thread(b, a, took) for b, a in zip(before, after, strict=True)]
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="the measured window")
    parser.add_argument("--rate", type=float, default=10.0, help="kernel lines a second")
    parser.add_argument("--vs", type=Path, help="another checkout's agent, run beside this one")
    args = parser.parse_args()
    device, why = device_usable()
    print(f"kernel lines from: {'/dev/kmsg' if device else f'a file ({why})'}", flush=True)
    roots = [ROOT, *([args.vs.resolve()] if args.vs else [])]
    figures: dict[str, float | str] = {"kmsg_mode": "device" if device else "file"}
    results = measure(roots, args.seconds, args.rate, device)
    for root, rows, key in zip(roots, results, ("", "baseline_"), strict=False):
        cpu, wakes = sum(r[0] for r in rows) / 10, sum(r[1] for r in rows)
        print(f"{root}: {cpu:.2f} % of a core, {wakes:.1f} wake-ups a second", flush=True)
        for ms, n in rows:
            if ms or n:
                each = ms * 1000 / max(n, 1)
                print(f"  a thread: {ms:.2f} ms/s, {n:.1f} wake-ups/s, {each:.0f} µs each")
        figures[f"{key}cpu_pct"] = round(cpu, 3)
        figures[f"{key}wakeups_per_s"] = round(wakes, 1)
    if args.vs:
        ratio = float(figures["cpu_pct"]) / float(figures["baseline_cpu_pct"])
        figures["cpu_ratio"] = round(ratio, 3)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
