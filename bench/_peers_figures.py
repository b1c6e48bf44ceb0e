"""Each figure of the peers bench: its runs, what each run prints, the keys it records (fw,
peer, ratio fw/peer within the run) and its rows in the final table."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from bench import _peers_detect as detect
from bench import _peers_lines as lines
from bench import _peers_prom as prom
from bench._peers_cost import cost_run
from bench._peers_procs import Usage
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
            r = lines.latency_run(
                backend=backend, pg=o.pg, device=o.device, lines=o.args.lines, rate=o.args.rate
            )
            fw, rs = r["fw"], r["rsyslog"]
            for q in ("p50", "p99"):
                figures.pair(
                    f"latency_{q}_ms_fw{s}", fw[f"{q}_ms"], f"latency_{q}_ms_rsyslog",
                    rs[f"{q}_ms"], f"latency_{q}_ratio_vs_rsyslog{s}",
                )  # fmt: skip
            figures.add(f"latency_lost_fw{s}", fw["lost"])
            figures.add("latency_lost_rsyslog", rs["lost"])
            print(
                f"latency {backend} run {run + 1}: freezewatch p50 {fw['p50_ms']:.1f} ms "
                f"p99 {fw['p99_ms']:.1f} ms ({fw['lost']:.0f} missing); rsyslog p50 "
                f"{rs['p50_ms']:.1f} ms p99 {rs['p99_ms']:.1f} ms ({rs['lost']:.0f} missing)",
                flush=True,
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
        figures.row(f"  lines lost of {n:,}", f"burst_lost_fw{s}", "burst_lost_rsyslog", None)
        for run in range(o.args.runs):
            order = ("rsyslog", "fw") if run % 2 == 0 else ("fw", "rsyslog")
            r = {
                side: lines.burst_file_run(side, backend=backend, pg=o.pg, count=n)
                for side in order
            }
            figures.pair(
                f"burst_lines_per_s_fw{s}", r["fw"]["lines_per_s"], "burst_lines_per_s_rsyslog",
                r["rsyslog"]["lines_per_s"], f"burst_ratio_vs_rsyslog{s}",
            )  # fmt: skip
            figures.add(f"burst_lost_fw{s}", r["fw"]["lost"])
            figures.add("burst_lost_rsyslog", r["rsyslog"]["lost"])
            print(
                f"burst {backend} run {run + 1}: freezewatch {r['fw']['lines_per_s']:,.0f} lines/s "
                f"({r['fw']['lost']:.0f} lost); rsyslog {r['rsyslog']['lines_per_s']:,.0f} lines/s "
                f"({r['rsyslog']['lost']:.0f} lost)",
                flush=True,
            )
        if o.device:
            _device_burst(figures, o, backend, n)


def _device_burst(figures: Figures, o: Options, backend: str, n: int) -> None:
    s = _suffix(backend)
    figures.row(
        f"{n:,} records into /dev/kmsg: delivered ({NAMES[backend]})",
        f"kmsg_burst_delivered_fw{s}", "kmsg_burst_delivered_rsyslog",
        f"kmsg_burst_delivered_ratio_vs_rsyslog{s}",
    )  # fmt: skip
    figures.row("  losses reported (rsyslog: none)", f"kmsg_burst_reported_lost_fw{s}", None, None)
    figures.row("  losses neither delivered nor reported", f"kmsg_burst_unaccounted_fw{s}",
                "kmsg_burst_unaccounted_rsyslog", None)  # fmt: skip
    for run in range(o.args.runs):
        r = lines.burst_device_run(backend=backend, pg=o.pg, count=n)
        fw, rs = r["fw"], r["rsyslog"]
        figures.pair(
            f"kmsg_burst_delivered_fw{s}", fw["delivered"], "kmsg_burst_delivered_rsyslog",
            rs["delivered"], f"kmsg_burst_delivered_ratio_vs_rsyslog{s}",
        )  # fmt: skip
        figures.add(f"kmsg_burst_reported_lost_fw{s}", fw["reported_lost"])
        figures.add(f"kmsg_burst_unaccounted_fw{s}", max(0.0, fw["lost"] - fw["reported_lost"]))
        figures.add("kmsg_burst_unaccounted_rsyslog", rs["lost"])
        print(
            f"/dev/kmsg burst {backend} run {run + 1} (written in {fw['write_s']:.2f} s): "
            f"freezewatch {fw['delivered']:.0f} delivered, {fw['reported_lost']:.0f} reported "
            f"lost; rsyslog {rs['delivered']:.0f} delivered",
            flush=True,
        )


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
        fw = statistics.median(detect.freezewatch(o.args.trials))
        figures.add("detection_p50_s_fw", fw)
        line = f"detection run {run + 1}: freezewatch p50 {fw:.2f} s"
        if "prometheus" in peers:
            for key, variant in variants.items():
                got = detect.prometheus(variant, o.args.trials)
                peer = statistics.median(got) if got else float("nan")
                figures.add(f"detection_p50_s_prometheus_{key}", peer)
                figures.ratio(f"detection_p50_ratio_vs_prometheus_{key}", fw, peer)
                line += f"; Prometheus+AM {variant.label} {peer:.2f} s"
        print(line, flush=True)


# (label, freezewatch key, peer key, ratio key); the freezewatch and ratio keys get the
# backend's suffix.
COST_ROWS = (
    ("agent CPU %, 1 Hz + 10 lines/s", "agent_cpu_pct", "rsyslog_sender_cpu_pct",
     "agent_cpu_ratio_vs_rsyslog"),
    ("agent RSS MB", "agent_rss_mb", "rsyslog_sender_rss_mb", "agent_rss_ratio_vs_rsyslog"),
    ("collector CPU %, one host", "collector_cpu_pct", "rsyslog_receiver_cpu_pct",
     "collector_cpu_ratio_vs_rsyslog"),
    ("collector RSS MB", "collector_rss_mb", "rsyslog_receiver_rss_mb",
     "collector_rss_ratio_vs_rsyslog"),
    ("collector CPU % idle (heartbeats) vs Prometheus+AM", "collector_cpu_idle_pct",
     "prometheus_am_cpu_pct", "collector_cpu_idle_ratio_vs_prometheus"),
    ("collector RSS MB idle vs Prometheus+AM", "collector_rss_idle_mb", "prometheus_am_rss_mb",
     "collector_rss_idle_ratio_vs_prometheus"),
)  # fmt: skip


def _cost_values(r: dict[str, dict[str, Usage]]) -> dict[str, float]:
    loaded, idle = r["loaded"], r["idle"]
    pick = {  # key: (window, process group, "cpu_pct" | "rss_mb")
        "agent_cpu_pct": (loaded, "agent", "cpu_pct"),
        "agent_rss_mb": (loaded, "agent", "rss_mb"),
        "rsyslog_sender_cpu_pct": (loaded, "rsyslog_sender", "cpu_pct"),
        "rsyslog_sender_rss_mb": (loaded, "rsyslog_sender", "rss_mb"),
        "collector_cpu_pct": (loaded, "collector", "cpu_pct"),
        "collector_rss_mb": (loaded, "collector", "rss_mb"),
        "rsyslog_receiver_cpu_pct": (loaded, "rsyslog_receiver", "cpu_pct"),
        "rsyslog_receiver_rss_mb": (loaded, "rsyslog_receiver", "rss_mb"),
        "collector_cpu_idle_pct": (idle, "collector", "cpu_pct"),
        "collector_rss_idle_mb": (idle, "collector", "rss_mb"),
        "prometheus_am_cpu_pct": (idle, "prometheus_am", "cpu_pct"),
        "prometheus_am_rss_mb": (idle, "prometheus_am", "rss_mb"),
        "node_exporter_cpu_pct": (loaded, "node_exporter", "cpu_pct"),
        "node_exporter_rss_mb": (loaded, "node_exporter", "rss_mb"),
        "postgres_cpu_pct": (loaded, "postgres", "cpu_pct"),
        "postgres_cpu_idle_pct": (idle, "postgres", "cpu_pct"),
    }
    return {
        key: float(getattr(window[group], attr))
        for key, (window, group, attr) in pick.items()
        if group in window
    }


def cost(figures: Figures, o: Options, peers: set[str]) -> None:
    if "rsyslog" not in peers:
        return
    if not prom.NODE_EXPORTER.exists():
        figures.skip("node_exporter", f"{prom.NODE_EXPORTER} missing (optional)")
    for backend in o.backends:
        s = _suffix(backend)
        for label, fw_key, peer_key, ratio_key in COST_ROWS:
            figures.row(f"{label} ({NAMES[backend]})", fw_key + s, peer_key, ratio_key + s)
        if backend == "postgres":
            figures.row("  its PostgreSQL server, CPU %", "postgres_cpu_pct", None, None)
            figures.row("  its PostgreSQL server, CPU % idle", "postgres_cpu_idle_pct", None, None)
        for run in range(o.args.runs):
            values = _cost_values(
                cost_run(
                    backend=backend, pg=o.pg, device=o.device, window_s=o.args.window,
                    with_prometheus="prometheus" in peers,
                )
            )  # fmt: skip
            for _label, fw_key, peer_key, ratio_key in COST_ROWS:
                if peer_key in values:
                    figures.pair(
                        fw_key + s, values[fw_key], peer_key, values[peer_key], ratio_key + s
                    )
                else:
                    figures.add(fw_key + s, values[fw_key])
            for key in ("node_exporter_cpu_pct", "node_exporter_rss_mb", "postgres_cpu_pct",
                        "postgres_cpu_idle_pct"):  # fmt: skip
                if key in values:
                    figures.add(key, values[key])
            shown = ", ".join(f"{k} {v:.2f}" for k, v in values.items())
            print(f"cost {backend} run {run + 1}: {shown}", flush=True)


FIGURES: dict[str, Callable[[Figures, Options, set[str]], None]] = {
    "latency": latency,
    "burst": burst,
    "detection": detection,
    "cost": cost,
}
