"""The runner's server-log sink: stored lines become the host's vLLM starts, phases and plans."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from agent.wire import INGEST_PATH
from collector import db
from collector.matrix.line_sink import LineSink
from collector.models import Boot, Host, Line
from tests.collector.conftest import Collector

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm"
BOOT = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
T0 = 1_764_400_000.0
NV_ERR = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)


def sink_for(c: Collector, run: int, start: float) -> LineSink:
    """A sink whose clock stamps line i (1-based) at ``start + i``; flushed only by hand."""
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as s:
        host = s.scalars(select(Host).where(Host.name == "spark-01")).one()
        boot = s.scalars(select(Boot.id).where(Boot.host_id == host.id)).one()
        host_id = host.id
    ticks = itertools.count(1)
    return LineSink(
        factory,
        host_id=host_id,
        boot=boot,
        tags={"matrix_run": run, "profile": "X", "repetition": 0},
        clock=lambda: start + next(ticks),
        flush_s=3600,
    )


def vllm(c: Collector) -> dict[str, Any]:
    r = c.client.get("/api/v1/hosts/spark-01/vllm", headers=c.admin)
    assert r.status_code == 200, r.text
    return r.json()


def test_matrix_server_lines_are_vllm_starts_of_the_host(collector: Collector) -> None:
    c = collector
    token = c.add_host("spark-01")
    # The driver error the agent shipped while the server loaded its drafter (line 6, T0 + 6).
    batch = {
        "host": "spark-01",
        "boot_id": BOOT,
        "agent": {"version": "test", "pid": 1},
        "lines": [{"seq": 1, "ts": T0 + 6.2, "source": "kmsg", "kseq": 1, "text": NV_ERR}],
    }
    r = c.client.post(
        INGEST_PATH, content=json.dumps(batch), headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200, r.text

    log = (FIXTURES / "v0.20.2_mtp_gb10.log").read_text().splitlines()
    sink = sink_for(c, run=7, start=T0)
    out, err = sink.callback("stdout"), sink.callback("stderr")
    for i, text in enumerate(log):
        (out if i % 2 else err)(text)
        if i == 7:
            sink.flush()  # a start followed across flushes, by one parser
    sink.close()

    doc = vllm(c)
    assert len(doc["plans"]) == 1
    plan = doc["plan"]
    assert plan["started_ts"] == T0 + 1
    assert (plan["outcome"], plan["phase"], plan["drafter_loaded"]) == ("started", "serving", True)
    assert (plan["model_load_gib"], plan["cuda_graph_estimate_gib"]) == (23.43, -0.9)
    assert (plan["kv_cache_gib"], plan["kv_cache_tokens"]) == (66.58, 5747892)
    phases = [p["phase"] for p in plan["phases"]]
    assert phases[:3] == ["starting", "loading_weights", "loading_drafter"]
    assert phases[-1] == "serving"
    assert plan["phases"][2]["ts"] == T0 + 6
    assert doc["phase"] == "serving"

    # The kernel event stored before these lines is now seen in the drafter load.
    r = c.client.get("/api/v1/hosts/spark-01/events", params={"kind": "nv_err"}, headers=c.admin)
    (event,) = r.json()["events"]
    assert event["vllm"]["phase"] == "loading_drafter"

    # The lines themselves stay stored, tagged with the run.
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as s:
        rows = list(s.scalars(select(Line).where(Line.source == "vllm").order_by(Line.id)))
        assert [x.text for x in rows] == log
        assert rows[0].fields == {
            "matrix_run": 7,
            "profile": "X",
            "repetition": 0,
            "stream": "stderr",
        }

    # The next server start (the next profile) is a second start of the host.
    sink = sink_for(c, run=7, start=T0 + 1000)
    add = sink.callback("stdout")
    for text in (FIXTURES / "v0.15.0_incomplete.log").read_text().splitlines():
        add(text)
    sink.close()
    doc = vllm(c)
    assert len(doc["plans"]) == 2
    assert doc["plan"]["started_ts"] == T0 + 1001
    assert doc["plans"][1]["outcome"] == "started"


SHM_WAIT = (  # club-3090#138: the engine's line, printed before any start line
    "(EngineCore pid=151) INFO 05-20 20:35:51 [shm_broadcast.py:681] No available shared "
    "memory broadcast block found in 60 seconds. This typically happens when some processes "
    "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache "
    "quantization)."
)


def test_a_hang_signal_held_when_the_server_output_ends_is_stored_at_its_line(
    collector: Collector,
) -> None:
    """Output that ends before any start line: the signal the parser held (it could not tell
    a hang from workers still starting) is a hang signal once the output has ended."""
    c = collector
    token = c.add_host("spark-01")
    batch = {"host": "spark-01", "boot_id": BOOT, "agent": {"version": "test", "pid": 1}}
    r = c.client.post(  # the host's boot
        INGEST_PATH, content=json.dumps(batch), headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200, r.text
    sink = sink_for(c, run=3, start=T0)
    sink.callback("stdout")(SHM_WAIT)
    sink.flush()
    signals = c.client.get(
        "/api/v1/hosts/spark-01/events", params={"kind": "vllm_hang_signal"}, headers=c.admin
    ).json()["events"]
    assert signals == []  # held: a start could still show the workers were starting
    sink.close()
    (signal,) = c.client.get(
        "/api/v1/hosts/spark-01/events", params={"kind": "vllm_hang_signal"}, headers=c.admin
    ).json()["events"]
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as s:
        line_id = s.scalars(select(Line.id).where(Line.source == "vllm")).one()
    assert signal["ts"] == T0 + 1
    assert signal["data"]["line_id"] == line_id
    assert signal["data"]["start_id"] is None
