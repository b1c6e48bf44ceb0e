"""Downsampled samples and the host timeline on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from collector import db
from collector.models import Host, MatrixRun, MatrixStep
from collector.readback.downsample import nice_step
from tests.collector.conftest import Collector
from tests.collector.freeze_support import BOOT_B, sample
from tests.collector.freeze_support import post as post_batch
from tests.collector.incidents.test_lifecycle import incident, lose
from tests.collector.ingest.test_batch import batch, kline, post
from tests.collector.ingest.test_derive import (
    BANNER,
    MTP_LOG,
    NV_ERR,
    kernel,
    vllm,
    vllm_lines,
)

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
    samples: dict[str, Any] = c.read("/api/v1/hosts/spark-01/samples", **params)
    return samples


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


def timeline(c: Collector, since: float, until: float, host: str = "spark-01") -> dict[str, Any]:
    resp = c.client.get(
        f"/api/v1/hosts/{host}/timeline", params={"since": since, "until": until}, headers=c.admin
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_markers_are_the_classified_kernel_events_with_their_vllm_phase(
    collector: Collector,
) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    drafter = lines[5]
    assert "Loading drafter model" in drafter["text"]
    nv_err = kernel(1, drafter["ts"] + 0.4, NV_ERR)
    banner = kernel(2, drafter["ts"] + 0.5, BANNER)  # an NVRM line, but no event
    chatter = {**kernel(3, drafter["ts"] + 0.6, "usb 1-1: new high-speed USB device")}
    assert post(collector, token, batch(lines=lines)).status_code == 200
    assert post(collector, token, batch(lines=[nv_err, banner, chatter])).status_code == 200

    data = timeline(collector, lines[0]["ts"] - 10, lines[-1]["ts"] + 10)
    (marker,) = data["markers"]
    assert (marker["ts"], marker["kind"], marker["text"]) == (nv_err["ts"], "nv_err", NV_ERR)
    assert (marker["source"], marker["priority"]) == ("kmsg", 3)
    assert marker["vllm_phase"] == "loading_drafter"
    assert "memory" in marker["meaning"].lower()
    lines_api = collector.client.get(
        "/api/v1/hosts/spark-01/lines", params={"source": "kmsg"}, headers=collector.admin
    ).json()["lines"]
    assert marker["line_id"] == next(ln["id"] for ln in lines_api if ln["text"] == NV_ERR)
    # Outside the window: nothing.
    assert timeline(collector, nv_err["ts"] + 1, nv_err["ts"] + 2)["markers"] == []


def test_phase_bands_run_until_the_next_phase(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    assert post(collector, token, batch(lines=lines)).status_code == 200
    phases = vllm(collector)["plan"]["phases"]
    names = [p["phase"] for p in phases]
    assert names[0] == "starting" and names[-1] == "serving"

    data = timeline(collector, phases[0]["ts"] - 60, phases[-1]["ts"] + 60)
    bands = data["phases"]
    assert [(b["phase"], b["start"], b["end"]) for b in bands] == [
        (p["phase"], p["ts"], nxt["ts"] if nxt else None)
        for p, nxt in zip(phases, [*phases[1:], None], strict=True)
    ]
    assert bands[2]["label"] == "loading drafter"
    assert data["now"] > phases[-1]["ts"]  # serving still: the last band is open

    # A view inside one phase still shows it (the band began before the view).
    profiling = names.index("profiling")
    lo, hi = phases[profiling]["ts"], phases[profiling + 1]["ts"]
    if hi - lo > 0.002:
        inner = timeline(collector, lo + 0.001, hi - 0.001)["phases"]
        assert [(b["phase"], b["start"], b["end"]) for b in inner] == [("profiling", lo, hi)]
    # Before the server started: no band.
    assert timeline(collector, phases[0]["ts"] - 60, phases[0]["ts"] - 1)["phases"] == []

    # The hosts list shows the latest start's phase and the latest sample's GPU and vLLM health.
    gpu = {**sample_at(1, phases[-1]["ts"] + 5, 50, 0.5), "gpu": {"util": 87.0}}
    gpu["vllm"] = [{"url": "http://127.0.0.1:8000", "health": "ok", "running": 2, "waiting": 0}]
    assert post(collector, token, batch(samples=[gpu])).status_code == 200
    (host,) = collector.client.get("/api/v1/hosts", headers=collector.admin).json()
    assert host["vllm_phase"] == "serving"
    assert (host["latest"]["gpu_util"], host["latest"]["vllm_health"]) == (87.0, "ok")


def add_steps(
    c: Collector, host: str, steps: list[tuple[str, str, str, float, float | None, str | None]]
) -> int:
    """A matrix run on ``host`` with (profile, kind, name, started, ended, outcome) steps."""
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        host_row = session.query(Host).filter_by(name=host).one()
        run = MatrixRun(name="sweep", host_id=host_row.id, spec={"host": host}, status="running")
        session.add(run)
        session.flush()
        for profile, kind, name, started, ended, outcome in steps:
            session.add(
                MatrixStep(
                    run_id=run.id,
                    profile=profile,
                    kind=kind,
                    name=name,
                    started_at=started,
                    ended_at=ended,
                    outcome=outcome,
                    detail={},
                )
            )
        return run.id


def set_run(c: Collector, run_id: int, **values: Any) -> None:
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        run = session.get(MatrixRun, run_id)
        for key, value in values.items():
            setattr(run, key, value)


def test_matrix_windows_are_startups_and_workloads_of_runs_on_the_host(
    collector: Collector,
) -> None:
    collector.add_host("spark-01")
    collector.add_host("spark-02")
    t = T0
    run_id = add_steps(
        collector,
        "spark-01",
        [
            ("X", "start", "start server", t, t + 1, "ok"),
            ("X", "health", "wait for /health", t + 1, t + 30, "ok"),
            ("X", "workload", "tools", t + 30, t + 90, "ok"),
            ("X", "stop", "stop server", t + 90, t + 91, "ok"),
            ("Y", "start", "start server", t + 91, t + 92, "ok"),
            ("Y", "health", "wait for /health", t + 92, t + 100, "timeout"),
            ("Y", "stop", "stop server", t + 100, t + 101, "ok"),
            ("Z", "start", "start server", t + 101, t + 102, "ok"),
            ("Z", "health", "wait for /health", t + 102, t + 110, "ok"),
            ("Z", "workload", "tools", t + 110, None, None),
        ],
    )
    add_steps(collector, "spark-02", [("X", "workload", "tools", t, t + 50, "ok")])

    windows = timeline(collector, t - 10, t + 200)["matrix"]
    got = [
        (w["profile"], w["kind"], w["workload"], w["start"], w["end"], w["status"]) for w in windows
    ]
    assert got == [
        ("X", "startup", None, t, t + 30, "ok"),
        ("X", "workload", "tools", t + 30, t + 90, "ok"),
        ("Y", "startup", None, t + 91, t + 100, "timeout"),
        ("Z", "startup", None, t + 101, t + 110, "ok"),
        ("Z", "workload", "tools", t + 110, None, "running"),
    ]
    assert {(w["run_id"], w["url"]) for w in windows} == {(run_id, f"/matrix/{run_id}")}

    # A view over the middle of X's health wait: the startup window still starts at its start.
    (mid,) = timeline(collector, t + 10, t + 20)["matrix"]
    assert (mid["kind"], mid["start"], mid["end"]) == ("startup", t, t + 30)

    # A run cut off by a restart: its open step ends with the run.
    ended = datetime.fromtimestamp(t + 150, tz=timezone.utc)
    set_run(collector, run_id, status="interrupted", ended_at=ended)
    last = timeline(collector, t - 10, t + 200)["matrix"][-1]
    assert (last["end"], last["status"]) == (pytest.approx(t + 150), "interrupted")


def test_incident_spans_run_from_the_last_heartbeat_to_the_return(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post_batch(collector, token, "spark-01", samples=[sample(1, datetime.now().timestamp())])
    iid = lose(collector)
    row = incident(collector, iid)
    start = row.last_heartbeat_at.timestamp()
    (span,) = timeline(collector, start - 60, start + 60)["incidents"]
    assert span == {
        "id": iid,
        "start": start,
        "end": None,
        "kind": "unreachable",
        "state": "open",
        "resolution": None,
        "url": f"/incidents/{iid}",
    }
    # Open: it reaches any later window.
    assert [s["id"] for s in timeline(collector, start + 3600, start + 7200)["incidents"]] == [iid]

    post_batch(collector, token, "spark-01", boot=BOOT_B)
    end = incident(collector, iid).returned_at.timestamp()
    (span,) = timeline(collector, start - 60, start + 60)["incidents"]
    assert (span["end"], span["state"], span["resolution"]) == (end, "resolved", "rebooted")
    assert timeline(collector, end + 1, end + 60)["incidents"] == []
    assert timeline(collector, start - 120, start - 1)["incidents"] == []
