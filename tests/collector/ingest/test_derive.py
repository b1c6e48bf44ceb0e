"""Ingest → kernel events, vLLM starts/phases, correlation and hangs, through the API
(SQLite and PostgreSQL)."""

from __future__ import annotations

import calendar
import re
from pathlib import Path
from typing import Any

from collector.vllm.state import VllmStates
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, post

VLLM_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
MTP_LOG = VLLM_FIXTURES / "v0.20.2_mtp_gb10.log"
NV_ERR = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)
XID_79 = (
    "NVRM: Xid (PCI:000f:01:00): 79, pid=2231, name=pt_main_thread, GPU has fallen off the bus."
)
BANNER = "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"
_STAMP = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def kernel(seq: int, ts: float, text: str, source: str = "kmsg", **extra: Any) -> dict[str, Any]:
    line = {"seq": seq, "ts": ts, "source": source, "priority": 3, "text": text, **extra}
    if source == "kmsg":
        line.setdefault("kseq", seq)
    return line


def vllm_lines(path: Path, seq0: int) -> list[dict[str, Any]]:
    """A saved vLLM log as shipped lines: ts from the line's stamp (2026, UTC), else the last."""
    out, ts = [], 0.0
    for i, text in enumerate(path.read_text().splitlines()):
        m = _STAMP.search(text)
        if m:
            mo, d, h, mi, s = (int(g) for g in m.groups())
            ts = float(calendar.timegm((2026, mo, d, h, mi, s)))
        out.append({"seq": seq0 + i, "ts": ts + i * 1e-3, "source": "vllm", "text": text})
    return out


def events(c: Collector, host: str = "spark-01", **params: Any) -> list[dict[str, Any]]:
    resp = c.client.get(f"/api/v1/hosts/{host}/events", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()["events"]


def vllm(c: Collector, host: str = "spark-01") -> dict[str, Any]:
    resp = c.client.get(f"/api/v1/hosts/{host}/vllm", headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_kernel_lines_become_events_once(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t0 = 1764400000.0
    body = batch(
        lines=[
            kernel(1, t0, BANNER),
            kernel(2, t0 + 1, XID_79),
            kernel(3, t0 + 2, "e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex"),
            kernel(4, t0 + 3, NV_ERR, source="journal", fields={"_TRANSPORT": "kernel"}),
            # The same text from a user process is not a kernel event.
            kernel(5, t0 + 4, NV_ERR, source="journal", fields={"_TRANSPORT": "stdout"}),
            kernel(6, t0 + 5, NV_ERR, source="netconsole"),
        ]
    )
    assert post(collector, token, body).status_code == 200
    assert post(collector, token, body).json()["duplicates"]["lines"] == 6
    got = events(collector)
    assert [(e["kind"], e["line"]["text"][:20]) for e in got] == [
        ("nv_err", NV_ERR[:20]),
        ("nv_err", NV_ERR[:20]),
        ("xid", XID_79[:20]),
    ]
    xid = got[2]
    assert xid["xid"] == 79 and xid["pci"] == "000f:01:00" and xid["gpu_fault"] is True
    assert xid["pid"] == 2231 and xid["process"] == "pt_main_thread"
    assert "fallen off the bus" in xid["meaning"].lower()
    nv = got[0]
    assert nv["nv_err"] == "NV_ERR_NO_MEMORY"
    assert nv["call_site"] == "_memdescAllocInternal @ mem_desc.c:1359"
    assert nv["meaning"] == "Out of memory" and nv["line"]["source"] == "netconsole"
    assert nv["vllm"] == {"phase": None, "line_id": None, "line_ts": None, "line": None}
    assert [e["kind"] for e in events(collector, kind="xid")] == ["xid"]
    assert len(events(collector, kind="gpu_fault", since=t0 + 2.5)) == 2
    assert len(events(collector, until=t0 + 1)) == 1


def test_vllm_log_gives_startup_plan_and_phases(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    for part in (lines[:7], lines[7:15], lines[15:]):  # a live stream arrives in pieces
        assert post(collector, token, batch(lines=part)).status_code == 200
    status = vllm(collector)
    plan = status["plan"]
    assert status["phase"] == "serving" and len(status["plans"]) == 1
    assert plan["vllm_version"] == "0.20.2" and plan["outcome"] == "started"
    assert plan["drafter_loaded"] is True and plan["model_load_gib"] == 23.43
    assert plan["cuda_graph_estimate_gib"] == -0.9
    assert plan["anomalies"] == ["negative CUDA graph memory estimate: -0.9 GiB"]
    assert plan["kv_cache_gib"] == 66.58 and plan["kv_cache_tokens"] == 5_747_892
    assert plan["max_concurrency"] == 21.93 and plan["max_concurrency_tokens"] == 262_144
    # The serving configuration its args and engine line state (the MTP drafter's too).
    assert (plan["max_model_len"], plan["max_num_seqs"], plan["gpu_memory_utilization"]) == (
        262_144,
        4,
        0.7,
    )
    assert (plan["speculative_method"], plan["num_speculative_tokens"]) == ("mtp", 2)
    assert [p["phase"] for p in plan["phases"]] == [
        "starting",
        "loading_weights",
        "loading_drafter",
        "profiling",
        "capturing_cuda_graphs",
        "serving",
    ]
    assert plan["phases"][2]["ts"] == lines[5]["ts"]  # "Loading drafter model..."
    kinds = [e["kind"] for e in events(collector)]
    assert "vllm_anomaly" in kinds
    stats = events(collector, kind="vllm_stats")
    assert stats and stats[-1]["data"]["generation_throughput"] == 41.2
    (spec,) = events(collector, kind="spec_decode")[-1:]
    assert spec["data"]["acceptance_rate_pct"] == 72.2


def test_parser_resumes_a_start_after_collector_restart(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    post(collector, token, batch(lines=lines[:8]))
    collector.client.app.state.vllm_states = VllmStates()  # type: ignore[attr-defined]
    post(collector, token, batch(lines=lines[8:]))
    status = vllm(collector)
    assert len(status["plans"]) == 1
    plan = status["plan"]
    assert plan["outcome"] == "started" and plan["kv_cache_tokens"] == 5_747_892
    assert [p["phase"] for p in plan["phases"]][-1] == "serving"
    assert len(plan["phases"]) == 6  # replay rebuilt state without duplicating phases


def test_nv_err_during_drafter_load_is_correlated(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    drafter = lines[5]
    assert "Loading drafter model" in drafter["text"]
    post(collector, token, batch(lines=lines[:7]))
    post(collector, token, batch(lines=[kernel(1, drafter["ts"] + 0.4, NV_ERR)]))
    (event,) = events(collector, kind="nv_err")
    assert event["vllm"]["phase"] == "loading_drafter"
    assert event["vllm"]["line"] == drafter["text"]
    assert event["vllm"]["line_ts"] == drafter["ts"]


def test_kernel_event_before_its_vllm_lines_is_correlated_when_they_arrive(
    collector: Collector,
) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    drafter = lines[5]
    post(collector, token, batch(lines=lines[:4]))
    post(collector, token, batch(lines=[kernel(1, drafter["ts"] + 0.3, NV_ERR)]))
    (early,) = events(collector, kind="nv_err")
    assert early["vllm"]["phase"] == "loading_weights" and early["vllm"]["line"] is None
    post(collector, token, batch(lines=lines[4:]))
    (event,) = events(collector, kind="nv_err")
    assert event["vllm"]["phase"] == "loading_drafter"
    assert event["vllm"]["line"] == drafter["text"]


def test_benign_banners_produce_no_event(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t0 = 1764400000.0
    banners = [
        BANNER,
        "nvidia-uvm: Loaded the UVM driver, major device number 510.",
        "NVRM: GPU at PCI:000f:01:00: GPU-2a4c6e1d-1f7b-4a1d-9b63-5e0b3f1c2d4e",
        "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  580.95.05",
    ]
    body = batch(lines=[kernel(i + 1, t0 + i, text) for i, text in enumerate(banners)])
    assert post(collector, token, body).json()["stored"]["lines"] == 4
    assert events(collector) == []


def vllm_sample(seq: int, ts: float, running: int, tokens: float, power: float) -> dict[str, Any]:
    entry = {"url": "http://127.0.0.1:8000", "health": 200, "health_ms": 1.2}
    entry |= {"running": running, "waiting": 0, "generation_tokens": tokens, "kv_usage": 0.1}
    return {"seq": seq, "ts": ts, "mem": {}, "gpu": {"power_w": power}, "vllm": [entry]}


def test_hang_detected_from_samples_and_resumed(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t0 = 1764400000.0
    moving = [vllm_sample(i, t0 + i, 2, 100.0 + 10 * i, 60.0) for i in range(5)]
    stuck = [vllm_sample(5 + i, t0 + 5 + i, 2, 140.0, 11.0) for i in range(20)]
    post(collector, token, batch(samples=moving))
    post(collector, token, batch(samples=stuck[:10]))
    assert events(collector, kind="vllm_hung") == []
    post(collector, token, batch(samples=stuck[10:]))
    (hung,) = events(collector, kind="vllm_hung")
    assert hung["ts"] == t0 + 19 and hung["data"]["since"] == t0 + 4
    assert hung["data"]["low_power"] is True and hung["data"]["running"] == 2
    status = vllm(collector)
    assert status["health"]["hung"] is True and status["health"]["hung_since"] == t0 + 4
    assert status["health"]["endpoints"][0]["health"] == 200
    post(collector, token, batch(samples=stuck[10:]))  # a replay decides nothing again
    post(collector, token, batch(samples=[vllm_sample(40, t0 + 40, 2, 150.0, 60.0)]))
    assert [e["kind"] for e in events(collector, kind="vllm_hung,vllm_resumed")] == [
        "vllm_resumed",
        "vllm_hung",
    ]
    assert vllm(collector)["health"]["hung"] is False


def test_a_server_without_metrics_is_reported_once_as_hang_detection_off(
    collector: Collector,
) -> None:
    # vLLM started with --disable-log-stats: /health answers, /metrics has no vllm:* series.
    token = collector.add_host("spark-01")
    t0 = 1764400000.0
    blind = {"url": "http://127.0.0.1:8000", "health": 200, "health_ms": 1.0, "error": None}
    blind |= dict.fromkeys(("running", "waiting", "kv_usage", "generation_tokens"))
    samples = [{"seq": i, "ts": t0 + i, "mem": {}, "vllm": [blind]} for i in range(30)]
    post(collector, token, batch(samples=samples[:15]))
    post(collector, token, batch(samples=samples[15:]))
    (off,) = events(collector, kind="vllm_hang_detection_off")
    assert off["data"]["url"] == "http://127.0.0.1:8000"
    assert "--disable-log-stats" in off["data"]["reason"]
    assert events(collector, kind="vllm_hung") == []


def test_events_and_vllm_need_the_admin_token(collector: Collector) -> None:
    collector.add_host("spark-01")
    for path in ("events", "vllm"):
        assert collector.client.get(f"/api/v1/hosts/spark-01/{path}").status_code == 401
    assert (
        collector.client.get("/api/v1/hosts/nope/vllm", headers=collector.admin).status_code == 404
    )
    assert vllm(collector) | {"host": "spark-01"} == {
        "host": "spark-01",
        "phase": None,
        "health": {"sample_ts": None, "endpoints": [], "hung": False, "hung_since": None},
        "plan": None,
        "plans": [],
    }


def test_phase_entered_just_after_the_event_counts_as_read_lag(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = vllm_lines(MTP_LOG, seq0=100)
    drafter_ts = lines[5]["ts"]
    lines[4]["ts"] = drafter_ts  # "Loading weights took" and "Loading drafter" read together
    post(collector, token, batch(lines=lines[:7]))
    post(collector, token, batch(lines=[kernel(1, drafter_ts - 0.005, NV_ERR)]))
    post(collector, token, batch(lines=[kernel(2, drafter_ts - 1.5, NV_ERR)]))
    later, earlier = events(collector, kind="nv_err")
    assert later["vllm"]["phase"] == "loading_drafter"
    assert later["vllm"]["line"] == lines[5]["text"]  # the phase's own line wins the tie
    assert earlier["vllm"]["phase"] == "loading_weights"
    assert earlier["vllm"]["line"] == lines[4]["text"]  # 1.5 s later, the only one in ±2 s
