"""What the incident page's headline and the freezes page's cause column read."""

from __future__ import annotations

import time

from tests.collector.conftest import Collector
from tests.collector.freeze_support import BOOT_B, kline, post, sample
from tests.collector.incidents.test_lifecycle import lose
from tests.collector.ingest.test_derive import MTP_LOG, NV_ERR, vllm_lines

LOCKUP = "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [VLLM::EngineCor:4242]"


def test_the_window_kernel_events_the_vllm_start_and_the_cause(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t_last = time.time()
    log = vllm_lines(MTP_LOG, 1000)
    shift = t_last - 90 - log[-1]["ts"]  # the server started and served before the freeze
    log = [{**x, "ts": x["ts"] + shift} for x in log]
    post(collector, token, "spark-01", lines=log)
    lines = [kline(1, t_last - 60, NV_ERR), kline(2, t_last - 3, LOCKUP)]
    samples = [sample(i, t_last - 30 + i) for i in range(1, 31)]
    post(collector, token, "spark-01", samples=samples, lines=lines)
    iid = lose(collector)
    api, admin = collector.client, collector.admin

    opened = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()
    assert [e["kind"] for e in opened["kernel_events"]] == ["soft_lockup", "nv_err"]
    lockup = opened["kernel_events"][0]
    assert lockup["line"]["text"] == LOCKUP and lockup["meaning"]
    start = opened["vllm_start"]
    assert start["outcome"] == "started" and start["drafter_loaded"] is True
    assert start["started_ts"] < t_last - 90

    post(collector, token, "spark-01", boot=BOOT_B, samples=[sample(1, time.time() + 60)],
         lines=[kline(1, time.time() + 60, LOCKUP)])  # fmt: skip
    resolved = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()
    # The new boot's lines are after the silence: not this incident's.
    assert [e["kind"] for e in resolved["kernel_events"]] == ["soft_lockup", "nv_err"]

    (listed,) = api.get("/api/v1/incidents", headers=admin).json()
    cause = listed["cause"]
    assert (cause["kind"], cause["nv_err"], cause["text"]) == ("nv_err", "NV_ERR_NO_MEMORY", NV_ERR)
    assert cause["ts"] == t_last - 60 and cause["line_id"] and cause["meaning"]


def test_an_incident_without_kernel_evidence_has_no_cause(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01", samples=[sample(1, time.time())])
    iid = lose(collector)
    (listed,) = collector.client.get("/api/v1/incidents", headers=collector.admin).json()
    assert (listed["id"], listed["cause"]) == (iid, None)
    detail = collector.client.get(f"/api/v1/incidents/{iid}", headers=collector.admin).json()
    assert detail["kernel_events"] == [] and detail["vllm_start"] is None
