"""contrib/: the Grafana dashboard and the Prometheus rules ask only for metrics the collector
exports, through a datasource variable (no hard-wired datasource); promtool accepts the files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.collector.alerts.test_delivery import lose
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import kline, post, sample
from tests.collector.metrics.families import GPU, VLLM
from tests.support import prometheus as prom_support
from tests.support.skips import require

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
DASHBOARD = json.loads((CONTRIB / "grafana" / "freezewatch.json").read_text())
RULES = yaml.safe_load((CONTRIB / "freezewatch-rules.yml").read_text())
OURS = re.compile(r"\b((?:freezewatch|process|python)_[a-z0-9_]+)\b")
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}
XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus."


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every series name a collector with a host, a sample, an Xid and an incident exports."""
    url = f"sqlite:///{tmp_path_factory.mktemp('grafana') / 'fw.db'}"
    gen = make_collector(url)
    c: Collector = next(gen)
    token = c.add_host("spark-01")
    now = time.time()
    s = sample(1, now) | {"gpu": GPU, "vllm": VLLM}
    post(c, token, "spark-01", samples=[s], lines=[kline(1, now, XID_79)])
    lose(c)
    text = c.client.get("/metrics").text
    gen.close()
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from panels(item.get("panels", []))


def exprs() -> Iterator[tuple[str, str]]:
    for panel in panels(DASHBOARD["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for annotation in DASHBOARD["annotations"]["list"]:
        if "expr" in annotation:
            yield f"annotation {annotation['name']}", annotation["expr"]
    for variable in DASHBOARD["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]


def test_datasource_is_a_variable_everywhere() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["host"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    users = [
        *(p for p in panels(DASHBOARD["panels"]) if p["type"] != "row"),
        *(t for p in panels(DASHBOARD["panels"]) for t in p.get("targets", [])),
        *(a for a in DASHBOARD["annotations"]["list"] if "expr" in a),
    ]
    wrong = [u.get("title", u.get("name", u.get("refId"))) for u in users
             if u.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}]  # fmt: skip
    assert wrong == []


def test_dashboard_has_the_overview_host_panels_and_annotations() -> None:
    titles = {p["title"] for p in panels(DASHBOARD["panels"])}
    assert {
        "Hosts overview",
        "Host $host",
        "Memory",
        "Pressure (PSI avg10)",
        "vLLM requests",
    } <= titles
    names = {a["name"] for a in DASHBOARD["annotations"]["list"]}
    assert {"Incidents opened", "Incidents resolved", "Kernel events"} <= names
    ids = [p["id"] for p in panels(DASHBOARD["panels"])]
    assert len(ids) == len(set(ids))


def test_every_dashboard_query_names_an_exported_metric(exported: set[str]) -> None:
    unknown = []
    for where, expr in exprs():
        named = OURS.findall(expr)
        assert named, f"{where}: {expr!r} names no freezewatch metric"
        unknown += [f"{where}: {name}" for name in named if name not in exported]
    assert unknown == []


def test_every_rule_names_an_exported_metric(exported: set[str]) -> None:
    rules = [r for group in RULES["groups"] for r in group["rules"]]
    assert rules
    unknown = [
        f"{r['alert']}: {n}" for r in rules for n in OURS.findall(r["expr"]) if n not in exported
    ]
    assert unknown == []


def test_promtool_accepts_the_contrib_files(tmp_path: Path) -> None:
    ok, reason = prom_support.available()
    require(ok and Path(prom_support.PROMTOOL).exists(), reason or "promtool missing")
    rules = subprocess.run(
        [prom_support.PROMTOOL, "check", "rules", str(CONTRIB / "freezewatch-rules.yml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert rules.returncode == 0, rules.stdout + rules.stderr
    # The scrape example names a token file: check it where that file exists.
    shutil.copy(CONTRIB / "freezewatch-rules.yml", tmp_path)
    token = tmp_path / "token"
    token.write_text("x")
    config = (CONTRIB / "prometheus.yml").read_text()
    config = config.replace("/etc/prometheus/freezewatch-metrics-token", str(token))
    (tmp_path / "prometheus.yml").write_text(config)
    checked = subprocess.run(
        [prom_support.PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
