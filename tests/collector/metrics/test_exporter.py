"""/metrics as prometheus_client renders it: per-host figures from the database, counters of
incidents and kernel events, ingest figures, bounded labels, the optional scrape token."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from collector.main import create_app
from collector.settings import Settings
from tests.collector.alerts.test_delivery import lose
from tests.collector.conftest import ADMIN_TOKEN, Collector, make_collector
from tests.collector.freeze_support import BOOT_A, BOOT_B, kline, post, sample
from tests.collector.metrics.families import GPU, VLLM

XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus."


def scrape(c: Collector, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = c.client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def tokened(sqlite_url: str) -> Iterator[Collector]:
    yield from make_collector(sqlite_url, metrics_token="fwm_scrape")


def test_host_figures_from_the_latest_sample(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    s = sample(1, time.time(), available=40 * 2**30)
    s |= {"gpu": GPU, "vllm": VLLM, "vmstat": {}}
    post(collector, token, "spark-01", samples=[s])
    m = scrape(collector)
    host = {"host": "spark-01"}
    assert value(m, "freezewatch_host_up", **host) == 1
    assert value(m, "freezewatch_host_status", **host, status="up") == 1
    assert value(m, "freezewatch_host_status", **host, status="lost") == 0
    assert value(m, "freezewatch_host_seconds_since_heartbeat", **host) >= 0
    assert value(m, "freezewatch_host_memory_available_bytes", **host) == 40 * 2**30
    assert value(m, "freezewatch_host_memory_used_bytes", **host) == 88 * 2**30
    psi = "freezewatch_host_pressure_avg10_percent"
    assert value(m, psi, **host, resource="memory", kind="full") == 0.25
    gpu = {**host, "gpu": "0"}
    assert value(m, "freezewatch_host_gpu_utilization_percent", **gpu) == 87
    assert value(m, "freezewatch_host_gpu_clock_hertz", **gpu, clock="sm") == 2.418e9
    endpoint = {**host, "endpoint": VLLM[0]["url"]}
    assert value(m, "freezewatch_host_vllm_up", **endpoint) == 1
    assert value(m, "freezewatch_host_vllm_requests_running", **endpoint) == 3
    assert value(m, "freezewatch_host_vllm_kv_cache_usage_ratio", **endpoint) == 0.42
    assert value(m, "freezewatch_host_vllm_generation_tokens_total", **endpoint) == 9000
    assert value(m, "freezewatch_host_agent_info", **host, version="test") == 1
    assert value(m, "freezewatch_host_agent_outdated", **host) == 1  # "test" is not 0.1.0
    stored = {"stream": "samples", "outcome": "stored"}
    assert value(m, "freezewatch_ingest_records_total", **stored) == 1
    assert value(m, "freezewatch_ingest_requests_total", code="200") == 1
    assert value(m, "process_resident_memory_bytes") > 0


def test_incidents_and_kernel_events_are_counted(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    now = time.time()
    post(collector, token, "spark-01", samples=[sample(1, now)], lines=[kline(1, now, XID_79)])
    lose(collector)
    m = scrape(collector)
    host = {"host": "spark-01"}
    assert value(m, "freezewatch_incidents_opened_total", **host, kind="unreachable") == 1
    assert value(m, "freezewatch_incidents_open", **host, kind="unreachable") == 1
    assert value(m, "freezewatch_kernel_events_total", **host, kind="xid", code="79") == 1
    assert value(m, "freezewatch_host_status", **host, status="lost") == 1
    assert value(m, "freezewatch_alert_deliveries", state="pending") == 0  # no targets

    post(collector, token, "spark-01", boot=BOOT_B, samples=[sample(1, time.time())])
    m = scrape(collector)
    resolved = {**host, "kind": "unreachable", "resolution": "rebooted"}
    assert value(m, "freezewatch_incidents_resolved_total", **resolved) == 1
    assert value(m, "freezewatch_incidents_opened_total", **host, kind="unreachable") == 1
    assert (
        "freezewatch_incidents_open",
        tuple(sorted({**host, "kind": "unreachable"}.items())),
    ) not in m


def test_labels_stay_bounded(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    token = c.add_host("spark-01")
    now = time.time()
    odd = [kline(i, now, f"NVRM: made up NV_ERR_ODD_{i} line-{i}-text") for i in range(1, 101)]
    post(c, token, "spark-01", samples=[sample(1, now)], lines=odd)
    r = c.client.get("/metrics")
    assert BOOT_A not in r.text and "line-7-text" not in r.text  # no boot ids, no line text
    m = scrape(c)
    codes = {
        dict(labels)["code"] for name, labels in m if name == "freezewatch_kernel_events_total"
    }
    assert len(codes) == 65 and "other" in codes  # 64 codes, the rest as "other"
    other = value(
        m, "freezewatch_kernel_events_total", host="spark-01", kind="nv_err", code="other"
    )
    assert other == 100 - 64


def test_metrics_token_when_configured(tokened: Collector) -> None:
    c = tokened
    assert c.client.get("/metrics").status_code == 401
    assert c.client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert c.client.get("/metrics", headers=c.admin).status_code == 401  # not the admin token
    ok = c.client.get("/metrics", headers={"Authorization": "Bearer fwm_scrape"})
    assert ok.status_code == 200 and "freezewatch_hosts" in ok.text
    assert c.client.get("/healthz").status_code == 200  # liveness stays open


def test_openmetrics_when_prometheus_asks(sqlite_collector: Collector) -> None:
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    r = sqlite_collector.client.get("/metrics", headers={"Accept": accept})
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")


def test_rejected_batches_are_counted(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    assert c.client.post("/api/v1/ingest", content=b"{}").status_code == 401
    m = scrape(c)
    assert value(m, "freezewatch_ingest_requests_total", code="401") == 1
    assert value(m, "freezewatch_ingest_records_total", stream="lines", outcome="stored") == 0


def test_the_leader_times_its_jobs_and_says_it_leads(sqlite_url: str) -> None:
    """With its scheduler on, a lone collector leads: its checker ticks are timed."""
    settings = Settings(db_url=sqlite_url, admin_token=ADMIN_TOKEN)
    with TestClient(create_app(settings)) as client:
        c = Collector(client=client, settings=settings)
        deadline = time.monotonic() + 30
        tick = ("freezewatch_job_duration_seconds_count", (("job", "check_heartbeats"),))
        while (m := scrape(c)).get(tick, 0) < 2:
            assert time.monotonic() < deadline, "no checker tick timed"
            time.sleep(0.1)
        assert value(m, "freezewatch_leader") == 1
        assert client.get("/healthz").json() == {"status": "ok", "leader": True}
    for quiet in make_collector(sqlite_url):  # no scheduler: it runs no job, leads nothing
        assert value(scrape(quiet), "freezewatch_leader") == 0
