"""What each side costs while it works: the agent next to rsyslog's sender (and node_exporter
when installed) at 1 Hz + 10 lines/s; the collector next to rsyslog's receiver and
Prometheus+Alertmanager for one host, then idle (heartbeats only, no lines). CPU is
utime+stime from /proc/PID/stat over the window, RSS at its end."""

from __future__ import annotations

import time
from collections.abc import Callable

from bench import _peers_prom as prom
from bench._peers_fw import postmaster_pid
from bench._peers_kmsg import new_nonce, tag
from bench._peers_lines import Sides, running
from bench._peers_procs import Usage, measure, run_dir
from tests.support.postgres import ThrowawayPostgres

LINES_PER_S = 10.0
WARMUP_S = 5.0
# (label, freezewatch key, peer key, ratio key)
ROWS = (
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
ROW_KEYS = {key for row in ROWS for key in row[1:3]}
# key: (window, process group, Usage field)
PICK = {
    "agent_cpu_pct": ("loaded", "agent", "cpu_pct"),
    "agent_rss_mb": ("loaded", "agent", "rss_mb"),
    "rsyslog_sender_cpu_pct": ("loaded", "rsyslog_sender", "cpu_pct"),
    "rsyslog_sender_rss_mb": ("loaded", "rsyslog_sender", "rss_mb"),
    "collector_cpu_pct": ("loaded", "collector", "cpu_pct"),
    "collector_rss_mb": ("loaded", "collector", "rss_mb"),
    "rsyslog_receiver_cpu_pct": ("loaded", "rsyslog_receiver", "cpu_pct"),
    "rsyslog_receiver_rss_mb": ("loaded", "rsyslog_receiver", "rss_mb"),
    "collector_cpu_idle_pct": ("idle", "collector", "cpu_pct"),
    "collector_rss_idle_mb": ("idle", "collector", "rss_mb"),
    "prometheus_am_cpu_pct": ("idle", "prometheus_am", "cpu_pct"),
    "prometheus_am_rss_mb": ("idle", "prometheus_am", "rss_mb"),
    "node_exporter_cpu_pct": ("loaded", "node_exporter", "cpu_pct"),
    "node_exporter_rss_mb": ("loaded", "node_exporter", "rss_mb"),
    "postgres_cpu_pct": ("loaded", "postgres", "cpu_pct"),
    "postgres_cpu_idle_pct": ("idle", "postgres", "cpu_pct"),
}


def _writing(sides: Sides, nonce: str) -> Callable[[float], None]:
    def drive(deadline: float) -> None:
        k = 0
        start = time.monotonic()
        while time.monotonic() < deadline:
            sides.writer.write(tag(nonce, k))
            k += 1
            time.sleep(max(0.0, start + k / LINES_PER_S - time.monotonic()))
            for sink in sides.sinks.values():
                sink.poll()  # keep the bench's own read-back small and steady

    return drive


def cost_run(
    *,
    backend: str,
    pg: ThrowawayPostgres | None,
    device: bool,
    window_s: float,
    with_prometheus: bool,
) -> dict[str, dict[str, Usage]]:
    """One run: ``loaded`` (10 lines/s) then ``idle`` windows; per window, per process group."""
    with (
        running(("rsyslog", "fw"), backend=backend, pg=pg, device=device) as sides,
        run_dir("prom") as (prom_tmp, ps),
    ):
        assert sides.fw is not None and sides.fw.agent_pid is not None
        rs_sender, rs_receiver = sides.pids["rsyslog"]
        groups = {
            "agent": [sides.fw.agent_pid],
            "collector": [sides.fw.collector_pid],
            "rsyslog_sender": [rs_sender],
            "rsyslog_receiver": [rs_receiver],
        }
        tree: frozenset[str] = frozenset()
        if backend == "postgres" and pg is not None:
            groups["postgres"] = [postmaster_pid(pg)]
            tree = frozenset({"postgres"})
        if with_prometheus:
            target_pid, target = prom.start_target(ps, "target")
            stack = prom.start(
                ps, prom_tmp, prom.VARIANTS["grace"], [target], "http://127.0.0.1:9/none"
            )
            groups["prometheus_am"] = [stack.prometheus_pid, stack.alertmanager_pid]
            if prom.NODE_EXPORTER.exists():
                groups["node_exporter"] = [target_pid]
        nonce = new_nonce()
        sides.sync(nonce)
        time.sleep(WARMUP_S)
        loaded = measure(groups, window_s, during=_writing(sides, nonce), tree=tree)
        sides.check_alive()
        idle = measure(groups, window_s, tree=tree)
        sides.check_alive()
    return {"loaded": loaded, "idle": idle}


def values(windows: dict[str, dict[str, Usage]]) -> dict[str, float]:
    """The figures of one run, by key (a process group not measured has none)."""
    return {
        key: float(getattr(windows[window][group], field))
        for key, (window, group, field) in PICK.items()
        if group in windows[window]
    }
