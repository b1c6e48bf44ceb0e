"""Each figure of the peers bench: its table rows, its runs (a failed run is recorded, the next
one goes on), and the keys each run records: freezewatch, peer, ratio fw/peer within the run.
Keys of freezewatch on PostgreSQL end in ``_postgres``; the peer's do not (it is the same)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from bench import _peers_cost as cost_
from bench import _peers_detect as detect
from bench import _peers_lines as lines
from bench import _peers_prom as prom
from bench._peers_report import Figures
from tests.support.postgres import ThrowawayPostgres

NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@dataclass
class Options:
    args: argparse.Namespace
    device: bool
    backends: tuple[str, ...]
    pg: ThrowawayPostgres | None


def _suffix(backend: str) -> str:
    return "" if backend == "sqlite" else f"_{backend}"


def latency(figures: Figures, o: Options, peers: set[str]) -> None:
    if "rsyslog" not in peers:
        return
    for backend in o.backends:
        s = _suffix(backend)
        for q in ("p50", "p99"):
            figures.row(
                f"kernel line → stored {q}, ms, {o.args.rate:g} lines/s ({NAMES[backend]})",
                f"latency_{q}_ms_fw{s}", f"latency_{q}_ms_rsyslog",
                f"latency_{q}_ratio_vs_rsyslog{s}",
            )  # fmt: skip
        for run in range(o.args.runs):
            what = f"latency {backend} run {run + 1}"
            with figures.attempt(what):
                r = lines.latency_run(
                    backend=backend, pg=o.pg, device=o.device, lines=o.args.lines, rate=o.args.rate
                )
                for q in ("p50", "p99"):
                    figures.pair(
                        f"latency_{q}_ms_fw{s}", r["fw"][f"{q}_ms"], f"latency_{q}_ms_rsyslog",
                        r["rsyslog"][f"{q}_ms"], f"latency_{q}_ratio_vs_rsyslog{s}",
                    )  # fmt: skip
                figures.add(f"latency_missing_fw{s}", r["fw"]["missing"])
                figures.add("latency_missing_rsyslog", r["rsyslog"]["missing"])
                print(f"{what}: {_sides(r, p50_ms='.1f', p99_ms='.1f', missing='.0f')}", flush=True)


def _sides(r: dict[str, dict[str, float]], **formats: str) -> str:
    """``freezewatch k v, ...; rsyslog k v, ...``: each side's values under ``formats``."""
    return "; ".join(
        f"{'freezewatch' if side == 'fw' else side} "
        + ", ".join(f"{k} {values[k]:{f}}" for k, f in formats.items() if k in values)
        for side, values in sorted(r.items(), key=lambda item: item[0] != "fw")
    )


def burst(figures: Figures, o: Options, peers: set[str]) -> None:
    if "rsyslog" not in peers:
        return
    n = o.args.burst
    for backend in o.backends:
        s = _suffix(backend)
        figures.row(
            f"{n:,}-line burst from a file, lines/s ({NAMES[backend]})",
            f"burst_lines_per_s_fw{s}", "burst_lines_per_s_rsyslog", f"burst_ratio_vs_rsyslog{s}",
        )  # fmt: skip
        figures.row(f"  of {n:,}, not stored after {lines.STALL_S:g} s without progress",
                    f"burst_missing_fw{s}", "burst_missing_rsyslog", None)  # fmt: skip
        for run in range(o.args.runs):
            what = f"burst {backend} run {run + 1}"
            with figures.attempt(what):
                order = ("rsyslog", "fw") if run % 2 == 0 else ("fw", "rsyslog")  # each alone
                r = {side: lines.burst_file_run(side, backend=backend, pg=o.pg, count=n)
                     for side in order}  # fmt: skip
                figures.pair(
                    f"burst_lines_per_s_fw{s}", r["fw"]["lines_per_s"], "burst_lines_per_s_rsyslog",
                    r["rsyslog"]["lines_per_s"], f"burst_ratio_vs_rsyslog{s}",
                )  # fmt: skip
                figures.add(f"burst_missing_fw{s}", r["fw"]["missing"])
                figures.add("burst_missing_rsyslog", r["rsyslog"]["missing"])
                print(f"{what}: {_sides(r, lines_per_s=',.0f', missing='.0f')}", flush=True)
        if o.device:
            _device_burst(figures, o, backend, n)


def _device_burst(figures: Figures, o: Options, backend: str, n: int) -> None:
    s = _suffix(backend)
    figures.row(
        f"{n:,} records into /dev/kmsg, both reading: delivered ({NAMES[backend]})",
        f"kmsg_burst_delivered_fw{s}", "kmsg_burst_delivered_rsyslog",
        f"kmsg_burst_delivered_ratio_vs_rsyslog{s}",
    )  # fmt: skip
    figures.row("  losses reported (rsyslog reports none)", f"kmsg_burst_reported_lost_fw{s}",
                None, None)  # fmt: skip
    figures.row("  neither delivered nor reported", f"kmsg_burst_unaccounted_fw{s}",
                "kmsg_burst_unaccounted_rsyslog", None)  # fmt: skip
    for run in range(o.args.runs):
        what = f"/dev/kmsg burst {backend} run {run + 1}"
        with figures.attempt(what):
            r = lines.burst_device_run(backend=backend, pg=o.pg, count=n)
            fw, rs = r["fw"], r["rsyslog"]
            figures.pair(
                f"kmsg_burst_delivered_fw{s}", fw["delivered"], "kmsg_burst_delivered_rsyslog",
                rs["delivered"], f"kmsg_burst_delivered_ratio_vs_rsyslog{s}",
            )  # fmt: skip
            figures.add(f"kmsg_burst_reported_lost_fw{s}", fw["reported_lost"])
            unaccounted = max(0.0, fw["missing"] - fw["reported_lost"])
            figures.add(f"kmsg_burst_unaccounted_fw{s}", unaccounted)
            figures.add("kmsg_burst_unaccounted_rsyslog", rs["missing"])
            fmt = {"delivered": ".0f", "reported_lost": ".0f", "write_s": ".2f"}
            print(f"{what}: {_sides(r, **fmt)}", flush=True)


def detection(figures: Figures, o: Options, peers: set[str]) -> None:
    variants = {k: v for k, v in prom.VARIANTS.items() if k != "defaults" or o.args.prom_defaults}
    if "defaults" not in variants:
        figures.skip("Prometheus at defaults", "--no-prom-defaults / --quick (minutes per run)")
    for key, variant in variants.items():
        figures.row(
            f"heartbeat loss → webhook p50, s (Prometheus+AM {variant.label})",
            "detection_p50_s_fw", f"detection_p50_s_prometheus_{key}",
            f"detection_p50_ratio_vs_prometheus_{key}",
        )  # fmt: skip
    for run in range(o.args.runs):
        what = f"detection run {run + 1}"
        with figures.attempt(what):
            fw = _detected(figures, "fw", detect.freezewatch(o.args.trials), o.args.trials)
            line = f"{what}: freezewatch p50 {fw:.2f} s"
            for key, variant in variants.items() if "prometheus" in peers else ():
                got = detect.prometheus(variant, o.args.trials)
                peer = _detected(figures, f"prometheus_{key}", got, o.args.trials)
                figures.ratio(f"detection_p50_ratio_vs_prometheus_{key}", fw, peer)
                line += f"; Prometheus+AM {variant.label} {peer:.2f} s"
            print(line, flush=True)


def _detected(figures: Figures, who: str, got: list[float], trials: int) -> float:
    """Records p50, slowest, and freezes never alerted on; returns the p50."""
    p50 = statistics.median(got) if got else float("nan")
    figures.add(f"detection_p50_s_{who}", p50)
    figures.add(f"detection_max_s_{who}", max(got, default=float("nan")))
    figures.add(f"detection_missed_{who}", float(trials - len(got)))
    return p50


def cost(figures: Figures, o: Options, peers: set[str]) -> None:
    if "rsyslog" not in peers:
        return
    if not prom.NODE_EXPORTER.exists():
        figures.skip("node_exporter", f"{prom.NODE_EXPORTER} missing (optional)")
    for backend in o.backends:
        s = _suffix(backend)
        for label, fw_key, peer_key, ratio_key in cost_.ROWS:
            figures.row(f"{label} ({NAMES[backend]})", fw_key + s, peer_key, ratio_key + s)
        if backend == "postgres":
            figures.row("  its PostgreSQL server, CPU %", "postgres_cpu_pct", None, None)
            figures.row("  its PostgreSQL server, CPU % idle", "postgres_cpu_idle_pct", None, None)
        for run in range(o.args.runs):
            what = f"cost {backend} run {run + 1}"
            with figures.attempt(what):
                values = cost_.values(
                    cost_.cost_run(
                        backend=backend, pg=o.pg, device=o.device, window_s=o.args.window,
                        with_prometheus="prometheus" in peers,
                    )
                )  # fmt: skip
                for _label, fw_key, peer_key, ratio_key in cost_.ROWS:
                    if peer_key in values:
                        fw, peer = values[fw_key], values[peer_key]
                        figures.pair(fw_key + s, fw, peer_key, peer, ratio_key + s)
                    else:
                        figures.add(fw_key + s, values[fw_key])
                for key in values.keys() - cost_.ROW_KEYS:  # PostgreSQL's server, node_exporter
                    figures.add(key, values[key])
                print(f"{what}: " + ", ".join(f"{k} {v:.2f}" for k, v in values.items()))


FIGURES: dict[str, Callable[[Figures, Options, set[str]], None]] = {
    "latency": latency,
    "burst": burst,
    "detection": detection,
    "cost": cost,
}
