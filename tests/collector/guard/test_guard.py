"""The guard on the collector: the state each agent reports, ``guard.fired`` alerts, the
timeline and incident evidence, matrix verdicts (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from collector import db
from collector.matrix.gates import evaluate_gates
from collector.matrix.report import render_markdown
from collector.matrix.results import MatrixReport, ProfileReport
from collector.matrix.spec import Gates
from collector.models import Delivery
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import post as freeze_post
from tests.collector.freeze_support import sample as freeze_sample
from tests.collector.incidents.test_lifecycle import lose
from tests.collector.ingest.test_batch import BOOT, batch, post, sample

T0 = 1764400000.0
ARMED = {
    "state": "armed",
    "rules": ["mem_available_below: 4GiB for 2s", "kernel_event: [xid fatal]"],
    "actions": ["docker_stop timeout=10.0 kill_after=5.0"],
    "cooldown_s": 300.0,
    "phases": None,
    "source": "/etc/freezewatch/guard.json",
    "crc32": "0badf00d",
}


@pytest.fixture
def hooked(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target (deliveries are queued, never sent)."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook")


def event(seq: int, kind: str, data: dict[str, Any], ts: float | None = None) -> dict[str, Any]:
    return {"seq": seq, "ts": T0 + seq if ts is None else ts, "kind": kind, "data": data}


def fired(seq: int, fire_id: str, *, dry_run: bool = False) -> dict[str, Any]:
    return event(
        seq,
        "guard_fired",
        {
            "fire_id": fire_id,
            "rule": "mem_available_below: 4GiB for 2s",
            "values": {"mem_available": 3 * 2**30, "threshold": 4 * 2**30, "held_s": 2.0},
            "phase": "serving",
            "dry_run": dry_run,
            "actions": ["docker_stop timeout=10.0 kill_after=5.0"],
            "tripped_at": T0 + seq,
        },
    )


def result(seq: int, fire_id: str) -> dict[str, Any]:
    outcome = {"action": "docker_stop", "ok": True, "detail": "nemoclaw-vllm: stopped", "ms": 812.0}
    return event(seq, "guard_result", {"fire_id": fire_id, "rule": "r", "results": [outcome]})


def guard_alerts(c: Collector) -> list[Delivery]:
    with db.session_scope(c.client.app.state.sessionmaker) as s:  # type: ignore[attr-defined]
        rows = list(s.scalars(select(Delivery).where(Delivery.event == "guard.fired")))
        s.expunge_all()
        return rows


def test_each_host_shows_the_guard_its_agent_reported(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    host = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert host["guard"] == {"state": None, "reported_at": None}  # no agent has said yet
    started = event(1, "agent_started", {"previous_boot_id": None, "guard": ARMED})
    assert post(collector, token, batch(events=[started])).status_code == 200
    host = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert host["guard"] == {**ARMED, "reported_at": T0 + 1}
    page = collector.client.get(
        "/hosts/spark-01", headers={**collector.admin, "Accept": "text/html"}
    )
    assert (
        'data-guard-state="armed"' in page.text and "mem_available_below: 4GiB for 2s" in page.text
    )
    # A spooled batch of an earlier start, replayed late, does not undo the newer report.
    old = event(2, "agent_started", {"guard": {"state": "off"}}, ts=T0 - 60)
    post(collector, token, batch(events=[old]))
    listed = collector.client.get("/api/v1/hosts", headers=collector.admin).json()
    assert listed[0]["guard"]["state"] == "armed"
    post(collector, token, batch(events=[event(3, "agent_started", {"guard": {"state": "odd"}})]))
    host = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert host["guard"]["state"] == "error"  # whatever an agent says, only known states show


def test_a_firing_alerts_once_and_a_dry_run_match_never(hooked: Collector) -> None:
    token = hooked.add_host("spark-01")
    body = batch(samples=[sample(1, available=3 * 2**30)], events=[fired(1, "f1")])
    assert post(hooked, token, body).status_code == 200
    post(hooked, token, body)  # the same batch again (a retry): no second alert
    post(hooked, token, batch(events=[fired(2, "f2", dry_run=True)]))
    [alert] = guard_alerts(hooked)
    assert alert.dedup_key == f"guard.fired:{BOOT}:f1"
    payload = json.loads(alert.body)
    assert payload["type"] == "guard.fired" and payload["host"]["name"] == "spark-01"
    assert payload["guard"]["rule"] == "mem_available_below: 4GiB for 2s"
    assert payload["guard"]["values"]["mem_available"] == 3 * 2**30
    assert payload["last_sample"]["mem_available"] == 3 * 2**30
    assert payload["url"].endswith("/hosts/spark-01")


def test_firings_are_on_the_timeline_with_their_results(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, batch(events=[fired(1, "f1"), fired(5, "f2", dry_run=True)]))
    post(collector, token, batch(events=[result(3, "f1")]))
    params = {"since": T0, "until": T0 + 60}
    timeline = collector.client.get(
        "/api/v1/hosts/spark-01/timeline", params=params, headers=collector.admin
    ).json()
    first, dry = timeline["guard"]
    assert (first["ts"], first["fire_id"], first["dry_run"]) == (T0 + 1, "f1", False)
    assert first["results"][0]["detail"] == "nemoclaw-vllm: stopped"
    assert first["text"] == (
        "guard mem_available_below: 4GiB for 2s: ran docker_stop timeout=10.0 kill_after=5.0"
    )
    assert dry["dry_run"] and dry["results"] is None and "would have run" in dry["text"]
    guard = collector.client.get(
        "/api/v1/hosts/spark-01/guard", params=params, headers=collector.admin
    ).json()
    assert [f["fire_id"] for f in guard["firings"]] == ["f1", "f2"] and guard["state"] is None


def test_the_freeze_right_after_a_firing_shows_it_in_the_incident(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t_last = time.time()
    samples = [freeze_sample(i, t_last - 30 + i) for i in range(1, 31)]
    firing = {**fired(1, "f1"), "ts": t_last - 3}
    freeze_post(collector, token, "spark-01", samples=samples, events=[firing])
    iid = lose(collector)
    detail = collector.client.get(f"/api/v1/incidents/{iid}", headers=collector.admin).json()
    assert [(g["fire_id"], g["ts"]) for g in detail["guard"]] == [("f1", t_last - 3)]


def profile(guard: dict[str, Any]) -> ProfileReport:
    return ProfileReport(profile="A", startup={"outcome": "ok"}, guard=guard)


def test_a_profile_that_needed_the_guard_did_not_pass() -> None:
    gates = Gates()
    assert evaluate_gates(gates, profile({"fired": 0, "dry_run": 0, "rules": []})) == ("PASS", [])
    verdict, reasons = evaluate_gates(gates, profile({"fired": 1, "dry_run": 2, "rules": ["r"]}))
    assert verdict == "FAIL"
    assert reasons == ["the guard fired x1 (r)", "the guard would have fired x2 (dry-run: r)"]
    report = MatrixReport(name="m", host="spark-01", profiles=[profile({"fired": 1, "dry_run": 2})])
    assert "| A | — | — | 1 (+2 dry-run) |" in render_markdown(report)
