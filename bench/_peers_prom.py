"""Prometheus + Alertmanager as the peer of freezewatch's detection: Prometheus scrapes
node-exporter-like targets on 127.0.0.1, an ``up == 0`` rule fires, Alertmanager posts it to
the bench's webhook receiver. Three set-ups (``VARIANTS``); configs generated here, each
program in the foreground, Alertmanager's cluster port off."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench._common import free_port
from bench._peers_procs import Procs
from bench._peers_rsyslog import wait_listening

PROMETHEUS = Path("/usr/bin/prometheus")
ALERTMANAGER = Path("/usr/bin/prometheus-alertmanager")
NODE_EXPORTER = Path("/usr/bin/prometheus-node-exporter")


@dataclass(frozen=True)
class Variant:
    """Prometheus's scrape/evaluation timing, the rule's ``for``, Alertmanager's grouping
    waits; ``None`` leaves the program's default."""

    label: str
    scrape: str | None
    timeout: str | None
    evaluation: str | None
    rule_for: str
    group_wait: str | None
    group_interval: str | None
    scrape_s: float  # the scrape interval in effect, to spread the freezes over one


VARIANTS = {
    # Prometheus 1 m scrape, 10 s timeout, 1 m evaluation; Alertmanager 30 s group_wait.
    "defaults": Variant("at defaults", None, None, None, "0s", None, None, 60.0),
    # One failed 1 s scrape + 2 s pending: the alert fires after 3 s without an answer.
    "grace": Variant("tuned to a 3 s grace", "1s", "1s", "1s", "2s", "0s", "1s", 1.0),
    "for0": Variant("tuned, for: 0s", "1s", "1s", "1s", "0s", "0s", "1s", 1.0),
}


def available() -> tuple[bool, str]:
    missing = [str(p) for p in (PROMETHEUS, ALERTMANAGER) if not p.exists()]
    if missing:
        return (
            False,
            f"{', '.join(missing)} missing (apt install prometheus prometheus-alertmanager)",
        )
    return True, ""


def prometheus_config(variant: Variant, targets: list[str], am_port: int, rules: Path) -> Any:
    timing = {
        key: value
        for key, value in (
            ("scrape_interval", variant.scrape),
            ("scrape_timeout", variant.timeout),
            ("evaluation_interval", variant.evaluation),
        )
        if value is not None
    }
    return {
        "global": timing,
        "rule_files": [str(rules)],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
        },
        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": targets}]}],
    }


def rules_config(variant: Variant) -> Any:
    rule = {"alert": "TargetDown", "expr": 'up{job="node"} == 0', "for": variant.rule_for}
    return {"groups": [{"name": "bench", "rules": [rule]}]}


def alertmanager_config(variant: Variant, webhook: str) -> Any:
    """One group per target (otherwise a second target's alert waits ``group_interval``)."""
    route: dict[str, Any] = {"receiver": "bench", "group_by": ["alertname", "instance"]}
    if variant.group_wait is not None:
        route["group_wait"] = variant.group_wait
    if variant.group_interval is not None:
        route["group_interval"] = variant.group_interval
    receiver = {"name": "bench", "webhook_configs": [{"url": webhook, "send_resolved": False}]}
    return {"route": route, "receivers": [receiver]}


@dataclass
class Stack:
    url: str
    prometheus_pid: int
    alertmanager_pid: int

    def up_count(self) -> int:
        """Targets whose last scrape succeeded."""
        try:
            r = httpx.get(f"{self.url}/api/v1/query", params={"query": "up == 1"}, timeout=10)
        except httpx.HTTPError:
            return 0
        return len(r.json()["data"]["result"]) if r.status_code == 200 else 0


def start_target(procs: Procs, name: str) -> tuple[int, str]:
    """The node-exporter-like stand-in (or node_exporter itself when installed)."""
    port = free_port()
    if NODE_EXPORTER.exists():
        argv = [str(NODE_EXPORTER), f"--web.listen-address=127.0.0.1:{port}"]
    else:
        argv = [sys.executable, "-m", "bench._peers_target", str(port)]
    pid = procs.start(name, argv)
    wait_listening(port)
    return pid, f"127.0.0.1:{port}"


def start(procs: Procs, workdir: Path, variant: Variant, targets: list[str], webhook: str) -> Stack:
    am_port, prom_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "am.yml").write_text(yaml.safe_dump(alertmanager_config(variant, webhook)))
    am_pid = procs.start(
        "alertmanager",
        [
            str(ALERTMANAGER),
            f"--config.file={workdir / 'am.yml'}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
    )
    wait_listening(am_port)
    (workdir / "rules.yml").write_text(yaml.safe_dump(rules_config(variant)))
    config = prometheus_config(variant, targets, am_port, workdir / "rules.yml")
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    prom_pid = procs.start(
        "prometheus",
        [
            str(PROMETHEUS),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn",
        ],
    )
    url = f"http://127.0.0.1:{prom_port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return Stack(url, prom_pid, am_pid)
        except httpx.HTTPError:
            pass
        if not procs.alive(prom_pid) or time.monotonic() > deadline:
            raise RuntimeError("prometheus did not start: " + procs.log_tail("prometheus"))
        time.sleep(0.2)
