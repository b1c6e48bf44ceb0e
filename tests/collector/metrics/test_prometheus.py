"""A real Prometheus scrapes a live collector with the contrib config and rules, and a metric
comes back through Prometheus's HTTP API; a scrape with the wrong token is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.wire import INGEST_PATH
from tests.support import prometheus as prom_support
from tests.support.skips import require
from tests.twohost.harness import running_collector

ROOT = Path(__file__).resolve().parents[3]
CONTRIB = ROOT / "contrib"
TOKEN = "fwm_test-metrics-token"
AVAILABLE = 37 * 2**30

pytestmark = pytest.mark.timeout(180)


def scrape_config(contrib: dict[str, Any], target: str, token_file: Path) -> dict[str, Any]:
    """contrib/prometheus.yml with the test's target, token, rules path and fast intervals."""
    config = json.loads(json.dumps(contrib))
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(CONTRIB / name) for name in contrib["rule_files"]]
    [job] = config["scrape_configs"]
    job["scrape_interval"] = "1s"
    job["static_configs"] = [{"targets": [target]}]
    job["authorization"]["credentials_file"] = str(token_file)
    wrong = json.loads(json.dumps(job))
    wrong["job_name"] = "freezewatch-wrong-token"
    wrong["authorization"] = {"type": "Bearer", "credentials": "not-the-token"}
    config["scrape_configs"].append(wrong)
    return config


def test_prometheus_scrapes_the_collector_and_answers_a_query(tmp_path: Path) -> None:
    ok, reason = prom_support.available()
    require(ok, reason)
    with running_collector(tmp_path, metrics_token=TOKEN, run_scheduler=False) as collector:
        token = collector.add_host("spark-01")
        batch = {
            "host": "spark-01",
            "boot_id": "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60",
            "agent": {"version": "0.1.0", "pid": 1, "started_at": time.time()},
            "samples": [{"seq": 1, "ts": time.time(), "mem": {"MemTotal": 128 * 2**30,
                         "MemAvailable": AVAILABLE}}],
        }  # fmt: skip
        r = httpx.post(
            collector.url + INGEST_PATH, json=batch, headers={"Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 200, r.text
        assert httpx.get(collector.url + "/metrics").status_code == 401  # token required

        token_file = tmp_path / "metrics-token"
        token_file.write_text(TOKEN)
        contrib = yaml.safe_load((CONTRIB / "prometheus.yml").read_text())
        target = collector.url.removeprefix("http://")
        with prom_support.TestPrometheus(scrape_config(contrib, target, token_file)) as prom:
            [result] = prom.wait_for('freezewatch_host_memory_available_bytes{host="spark-01"}')
            assert float(result["value"][1]) == AVAILABLE
            assert result["metric"]["job"] == "freezewatch"
            [up] = prom.query('freezewatch_host_up{host="spark-01"}')
            assert up["value"][1] == "1"
            [ingested] = prom.query(
                'freezewatch_ingest_records_total{stream="samples",outcome="stored"}'
            )
            assert ingested["value"][1] == "1"

            # Each target is scraped on its own schedule: wait until both have been scraped.
            deadline = time.monotonic() + 30
            while True:
                targets = {t["labels"]["job"]: t for t in prom.api("targets")["activeTargets"]}
                scraped = all(t["health"] != "unknown" for t in targets.values())
                if scraped or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert targets["freezewatch"]["health"] == "up"
            wrong = targets["freezewatch-wrong-token"]
            assert wrong["health"] == "down" and "401" in wrong["lastError"]

            deadline = time.monotonic() + 30
            while True:  # the example rules load and evaluate without error
                rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
                if all(r.get("lastEvaluation", "").startswith("2") and r["health"] != "unknown"
                       for r in rules) or time.monotonic() > deadline:  # fmt: skip
                    break
                time.sleep(0.5)
            assert {r["name"] for r in rules} >= {"FreezewatchHostLost", "FreezewatchGpuFault"}
            assert [(r["name"], r["health"], r.get("lastError")) for r in rules
                    if r["health"] != "ok"] == []  # fmt: skip
