"""Downsampled samples and the host timeline on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from collector.services.downsample import nice_step
from tests.collector.conftest import Collector
from tests.collector.test_ingest import batch, kline, post

T0 = 1764400080.0  # a two-minute boundary
GIB = 2**30


def sample_at(seq: int, ts: float, available_gib: float, psi_full: float) -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": ts,
        "mem": {"MemTotal": 128 * GIB, "MemAvailable": int(available_gib * GIB)},
        "psi": {"memory": {"some": {"avg10": psi_full * 2}, "full": {"avg10": psi_full}}},
    }


def series(c: Collector, **params: float) -> dict[str, Any]:
    resp = c.client.get("/api/v1/hosts/spark-01/samples", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_step_buckets_give_min_max_avg_from_samples_and_rollups(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    # Minute 0: 10, 20 GiB; minute 1: 30 GiB; minute 2: 40 GiB, PSI full 1.0 / 3.0 / 5.0 / 7.0.
    samples = [
        sample_at(1, T0 + 1, 10, 1.0),
        sample_at(2, T0 + 40, 20, 3.0),
        sample_at(3, T0 + 70, 30, 5.0),
        sample_at(4, T0 + 130, 40, 7.0),
    ]
    assert post(collector, token, batch(samples=samples)).status_code == 200
    window = {"since": T0, "until": T0 + 180}

    raw = series(collector, **window, step=30)  # sub-minute step: read from samples
    assert raw["t"] == [T0, T0 + 30, T0 + 60, T0 + 120]
    assert raw["avg"]["mem_available"] == [10 * GIB, 20 * GIB, 30 * GIB, 40 * GIB]

    minute = series(collector, **window, step=60)  # whole minutes: read from the rollups
    assert minute["t"] == [T0, T0 + 60, T0 + 120]
    assert minute["avg"]["mem_available"] == [15 * GIB, 30 * GIB, 40 * GIB]
    assert minute["min"]["mem_available"][0] == 10 * GIB
    assert minute["max"]["psi_mem_full_avg10"] == [3.0, 5.0, 7.0]
    assert "gpu_util" not in minute["avg"]  # never reported: left out

    wide = series(collector, **window, step=120)
    assert wide["t"] == [T0, T0 + 120]
    # Weighted by samples per minute: (10 + 20 + 30) / 3, not (15 + 30) / 2.
    assert wide["avg"]["mem_available"] == [20 * GIB, 40 * GIB]
    assert wide["max"]["mem_available"] == [30 * GIB, 40 * GIB]

    # A late sample (spool replay) inside minute 0 updates that minute's rollup.
    late = [sample_at(5, T0 + 50, 60, 9.0)]
    assert post(collector, token, batch(samples=late)).status_code == 200
    again = series(collector, **window, step=60)
    assert again["avg"]["mem_available"][0] == 30 * GIB
    assert again["max"]["psi_mem_full_avg10"][0] == 9.0


def test_timeline_has_series_and_kernel_markers(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    nvrm = {**kline(30, 900, "NVRM: Xid (PCI:000f:01:00): 13, pid=4242, Graphics Exception")}
    nvrm["ts"] = T0 + 7.5
    chatter = {**kline(31, 901, "usb 1-1: new high-speed USB device"), "priority": 6}
    chatter["ts"] = T0 + 8
    body = batch(samples=[sample_at(1, T0 + 5, 50, 0.5)], lines=[nvrm, chatter])
    assert post(collector, token, body).status_code == 200

    resp = collector.client.get(
        "/api/v1/hosts/spark-01/timeline",
        params={"since": T0, "until": T0 + 600},
        headers=collector.admin,
    )
    assert resp.status_code == 200, resp.text
    data = resp.json()
    assert data["step"] == nice_step(600, 1500) == 1
    assert data["series"]["t"] == [T0 + 5]
    assert [(m["ts"], m["kind"]) for m in data["markers"]] == [(nvrm["ts"], "xid")]
    assert data["phases"] == data["incidents"] == data["matrix"] == []


def test_bad_steps_are_rejected(collector: Collector) -> None:
    collector.add_host("spark-01")
    bad = collector.client.get(
        "/api/v1/hosts/spark-01/samples",
        params={"since": 0, "until": 7 * 86400, "step": 1},
        headers=collector.admin,
    )
    assert bad.status_code == 400
    assert "buckets" in bad.json()["detail"]


def test_nice_step_for_the_presets() -> None:
    assert nice_step(300, 1500) == 1
    assert nice_step(86400, 1500) == 60
    assert nice_step(7 * 86400, 1500) == 600
