"""freezewatch side by side with the tools it replaces (issue 17), on this machine, same records.

- latency: kernel line → stored, p50/p99 at ~20 lines/s; rsyslog imkmsg → omfwd TCP → imtcp →
  omfile next to agent → HTTP → collector → database row (SQLite, PostgreSQL).
- burst: 50,000 lines appended to a file, lines/s from first written to last stored, each side
  alone (rsyslog imfile vs the agent's ``--kmsg FILE``); in device mode also 50,000 records
  written into /dev/kmsg with both reading: records delivered, losses reported.
- detection: SIGSTOP of a real agent → signed webhook, vs Prometheus+Alertmanager (``up == 0``
  of a stopped scrape target → webhook) at defaults, tuned to a 3 s grace, and ``for: 0s``.
- cost: CPU % and RSS of the agent vs rsyslog's sender at 1 Hz + 10 lines/s, of the collector
  vs rsyslog's receiver and Prometheus+Alertmanager, for one host, then idle.

Kernel lines come from the real /dev/kmsg when it can be written and read back here (root; the
run sets ``printk_devkmsg`` to ``on`` and restores it), else from a regular file both follow; the
``kmsg_mode`` figure says which ran. Every peer runs in the foreground on configs generated in a
temp dir, bound to 127.0.0.1; a missing one is skipped with the reason. Ratios are fw/peer
within one run (latency > 1: slower; burst < 1: slower). The last line is one JSON object.

    python bench/peers.py [--runs 3] [--only latency,burst,detection,cost] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _peers_procs as procs_
from bench import _peers_prom as prom
from bench import _peers_rsyslog as rsyslog
from bench._peers_figures import FIGURES, Options
from bench._peers_kmsg import device_usable, devkmsg_on
from bench._peers_procs import terminate_as_interrupt
from bench._peers_report import Figures
from tests.support import postgres

REQUIRED = (
    "latency_p50_ratio_vs_rsyslog",
    "latency_p99_ratio_vs_rsyslog",
    "burst_ratio_vs_rsyslog",
    "collector_cpu_idle_pct",
    "agent_cpu_pct",
)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(FIGURES), help="figures to run (comma-separated)")
    p.add_argument("--runs", type=int, default=3, help="repetitions of each figure")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--kmsg-mode", choices=("auto", "device", "file"), default="auto")
    p.add_argument("--lines", type=int, default=200, help="latency: records per run")
    p.add_argument("--rate", type=float, default=20.0, help="latency: records per second")
    p.add_argument("--burst", type=int, default=50_000, help="burst: records")
    p.add_argument("--trials", type=int, default=5, help="detection: freezes per run")
    p.add_argument("--window", type=float, default=60.0, help="cost: seconds per window")
    p.add_argument("--prom-defaults", action=argparse.BooleanOptionalAction, default=True,
                   help="detection: also Prometheus at its defaults (minutes per run)")  # fmt: skip
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep each run's directory (configs, logs, databases) in DIR")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help="1 run, 20 lines, 5,000-line bursts, 5 s windows, 2 trials, "
                   "no Prometheus at defaults")  # fmt: skip
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.lines, args.burst, args.trials, args.window = 1, 20, 5000, 2, 5.0
        args.prom_defaults = False
    unknown = set(args.only.split(",")) - set(FIGURES)
    if unknown:
        p.error(f"unknown figures {sorted(unknown)}; known: {', '.join(FIGURES)}")
    return args


def kmsg_mode(wanted: str, stack: contextlib.ExitStack) -> tuple[bool, str]:
    """(device, why): /dev/kmsg with ``printk_devkmsg`` on (entered on ``stack``), or a file."""
    if wanted == "file":
        return False, "file (--kmsg-mode file)"
    try:
        with procs_.uninterrupted():
            stack.enter_context(devkmsg_on())
        usable, reason = device_usable()
    except OSError as exc:
        usable, reason = False, f"printk_devkmsg cannot be set: {exc}"
    if not usable and wanted == "device":
        raise SystemExit(f"--kmsg-mode device: {reason}")
    return usable, "device (/dev/kmsg)" if usable else f"file ({reason})"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    figures = Figures()
    only = args.only.split(",")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        procs_.KEEP = args.keep.resolve()
    with terminate_as_interrupt(), contextlib.ExitStack() as stack:
        device, mode = kmsg_mode(args.kmsg_mode, stack)
        print(f"kernel lines from: {mode}", flush=True)
        load_start = os.getloadavg()[0]  # the machine is shared: say how busy it was
        print(f"load average: {load_start:.1f} on {os.cpu_count()} CPUs", flush=True)
        backends = args.backends.split(",")
        pg = None
        if "postgres" in backends and set(only) & {"latency", "burst", "cost"}:
            ok, reason = postgres.available()
            if ok:
                with procs_.uninterrupted():  # its cluster must not outlive a Ctrl-C
                    pg = stack.enter_context(postgres.ThrowawayPostgres())
            else:
                figures.skip("PostgreSQL", reason)
                backends.remove("postgres")
        opts = Options(args=args, device=device, backends=tuple(backends), pg=pg)
        peers = {"rsyslog": rsyslog.available(), "prometheus": prom.available()}
        for name, (ok, reason) in peers.items():
            if not ok:
                figures.skip(name, reason)
        for name in only:
            FIGURES[name](figures, opts, {p for p, (ok, _r) in peers.items() if ok})
    print()
    print(figures.table())
    load = {"load_avg_start": round(load_start, 1), "load_avg_end": round(os.getloadavg()[0], 1)}
    summary = figures.summary(REQUIRED, kmsg_mode=mode.split(" ")[0], runs=args.runs, **load)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: every process stopped, printk_devkmsg restored", file=sys.stderr)
        sys.exit(130)
