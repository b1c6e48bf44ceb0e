"""POST /api/v1/ingest on SQLite and PostgreSQL: stored once, rejected whole, limits."""

from __future__ import annotations

import gzip
import json
import threading
import time
from typing import Any

from sqlalchemy import func, select

from agent.wire import INGEST_PATH, MAX_LINE_BYTES
from collector import db
from collector.hosts import registry as hosts
from collector.ingest.batch import ingest_batch
from collector.models import Line
from collector.schemas import Batch
from collector.settings import Settings
from collector.timeutil import from_epoch
from tests.collector.conftest import Collector

BOOT = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"


def batch(host: str = "spark-01", **streams: Any) -> dict[str, Any]:
    return {
        "host": host,
        "boot_id": BOOT,
        "agent": {"version": "0.1.0", "pid": 4242, "started_at": 1764400000.0},
        **streams,
    }


def kline(seq: int, kseq: int, text: str = "NVRM: nvAssertFailed") -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": 1764400000.0 + seq,
        "source": "kmsg",
        "priority": 3,
        "facility": 0,
        "kseq": kseq,
        "text": text,
    }


def sample(seq: int, available: int = 40 * 2**30) -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": 1764400000.0 + seq,
        "mem": {"MemTotal": 128 * 2**30, "MemAvailable": available, "SwapTotal": 0, "SwapFree": 0},
        "psi": {"memory": {"some": {"avg10": 1.5}, "full": {"avg10": 0.25}}},
        "load": {"1": 0.5},
    }


def post(c: Collector, token: str, body: Any, **headers: str) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return c.client.post(
        INGEST_PATH,
        content=raw,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers},
    )


def test_batch_is_stored_once_and_replay_is_all_duplicates(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    body = batch(
        samples=[sample(1), sample(2)],
        lines=[kline(1, 100), kline(2, 101)],
        events=[{"seq": 1, "ts": 1764400000.0, "kind": "agent_started", "data": {}}],
    )
    first = post(collector, token, body)
    assert first.status_code == 200, first.text
    assert first.json()["stored"] == {"samples": 2, "lines": 2, "events": 1}
    assert first.json()["resume"] == {"kseq": 101}

    again = post(collector, token, body)
    assert again.status_code == 200
    assert again.json()["stored"] == {"samples": 0, "lines": 0, "events": 0}
    assert again.json()["duplicates"] == {"samples": 2, "lines": 2, "events": 1}

    lines = collector.client.get("/api/v1/hosts/spark-01/lines", headers=collector.admin).json()
    assert [line["kseq"] for line in lines["lines"]] == [100, 101]
    samples = collector.client.get(
        "/api/v1/hosts/spark-01/samples", headers=collector.admin
    ).json()["samples"]
    assert [s["seq"] for s in samples] == [1, 2]
    assert samples[0]["psi_mem_full_avg10"] == 0.25


def test_kernel_record_reread_under_new_seq_is_a_duplicate(collector: Collector) -> None:
    """An agent restarted without state re-reads /dev/kmsg: same kseq, new seq, one row."""
    token = collector.add_host("spark-01")
    assert post(collector, token, batch(lines=[kline(1, 500)])).status_code == 200
    resp = post(collector, token, batch(lines=[kline(90001, 500), kline(90002, 501)]))
    assert resp.json()["stored"]["lines"] == 1
    assert resp.json()["duplicates"]["lines"] == 1


def test_overlapping_replay_stores_only_the_new_records_of_every_stream(
    collector: Collector,
) -> None:
    """A spool replay overlapping what arrived live: the new half of each stream is stored,
    the old half counted as duplicates, and the same transaction goes on to the next stream
    (on PostgreSQL the optimistic COPY fails on the first duplicate and is undone)."""
    token = collector.add_host("spark-01")
    live = batch(samples=[sample(s) for s in (1, 2)], lines=[kline(s, 100 + s) for s in (1, 2)])
    assert post(collector, token, live).json()["stored"] == {"samples": 2, "lines": 2, "events": 0}

    replay = batch(
        samples=[sample(s) for s in (1, 2, 3, 4)],
        lines=[kline(s, 100 + s) for s in (1, 2, 3, 4)],
        events=[{"seq": 1, "ts": 1764400001.0, "kind": "spool_dropped", "data": {"samples": 0}}],
    )
    resp = post(collector, token, replay).json()
    assert resp["stored"] == {"samples": 2, "lines": 2, "events": 1}
    assert resp["duplicates"] == {"samples": 2, "lines": 2, "events": 0}

    after = post(collector, token, batch(lines=[kline(5, 105)])).json()
    assert after["stored"]["lines"] == 1
    lines = collector.client.get("/api/v1/hosts/spark-01/lines", headers=collector.admin).json()
    assert [line["kseq"] for line in lines["lines"]] == [101, 102, 103, 104, 105]


def test_malformed_batch_is_rejected_whole_naming_the_field(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    bad = batch(lines=[kline(1, 1), {**kline(2, 2), "source": "carrier-pigeon"}])
    resp = post(collector, token, bad)
    assert resp.status_code == 422
    assert "lines.1.source" in resp.json()["detail"]
    lines = collector.client.get("/api/v1/hosts/spark-01/lines", headers=collector.admin).json()
    assert lines["lines"] == []  # the valid first line was not stored either

    assert post(collector, token, b"{not json").status_code == 422
    missing = batch()
    del missing["boot_id"]
    assert "boot_id" in post(collector, token, missing).json()["detail"]


def test_auth_wrong_token_and_wrong_host(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    collector.add_host("spark-02")
    assert post(collector, "fwh_nope", batch()).status_code == 401
    no_auth = collector.client.post(INGEST_PATH, json=batch())
    assert no_auth.status_code == 401
    wrong_host = post(collector, token, batch(host="spark-02"))
    assert wrong_host.status_code == 403
    assert "spark-01" in wrong_host.json()["detail"]


def test_oversized_body_and_gzip_bomb_are_413(sqlite_url: str) -> None:
    from tests.collector.conftest import make_collector

    for collector in make_collector(sqlite_url, max_body_bytes=64 * 1024):
        token = collector.add_host("spark-01")
        big = batch(lines=[kline(i, i, "x" * 1000) for i in range(1, 100)])
        assert post(collector, token, big).status_code == 413
        bomb = gzip.compress(b" " * (10 * 2**20))  # 10 MiB of spaces, ~10 KiB compressed
        assert post(collector, token, bomb, **{"Content-Encoding": "gzip"}).status_code == 413
        ok = gzip.compress(json.dumps(batch(lines=[kline(1, 1)])).encode())
        resp = post(collector, token, ok, **{"Content-Encoding": "gzip"})
        assert resp.status_code == 200 and resp.json()["stored"]["lines"] == 1


def test_overlong_line_is_truncated_and_flagged(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    text = "é" * MAX_LINE_BYTES  # 2 bytes per character: twice the limit
    resp = post(collector, token, batch(lines=[kline(1, 1, text)]))
    assert resp.status_code == 200
    (line,) = collector.client.get("/api/v1/hosts/spark-01/lines", headers=collector.admin).json()[
        "lines"
    ]
    assert line["truncated"] is True
    assert len(line["text"].encode()) <= MAX_LINE_BYTES
    assert line["text"] == "é" * (MAX_LINE_BYTES // 2)


def test_lines_filters_and_cursor_pagination(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    lines = [kline(i, i, f"line {i}") for i in range(1, 11)]
    lines[4]["text"] = "NVRM: NV_ERR_NO_MEMORY"
    lines[5] = {**lines[5], "source": "vllm", "kseq": None, "priority": 6}
    post(collector, token, batch(lines=lines))
    url = "/api/v1/hosts/spark-01/lines"
    got, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = collector.client.get(url, params=params, headers=collector.admin).json()
        got += [line["seq"] for line in page["lines"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert got == list(range(1, 11))
    q = collector.client.get(url, params={"q": "NV_ERR"}, headers=collector.admin).json()
    assert [line["seq"] for line in q["lines"]] == [5]
    vllm = collector.client.get(url, params={"source": "vllm"}, headers=collector.admin).json()
    assert [line["seq"] for line in vllm["lines"]] == [6]
    errs = collector.client.get(url, params={"min_priority": 3}, headers=collector.admin).json()
    assert 6 not in [line["seq"] for line in errs["lines"]]
    ranged = collector.client.get(
        url, params={"since": 1764400003.0, "until": 1764400004.0}, headers=collector.admin
    ).json()
    assert [line["seq"] for line in ranged["lines"]] == [3, 4]


def test_read_api_needs_admin_token(collector: Collector) -> None:
    collector.add_host("spark-01")
    assert collector.client.get("/api/v1/hosts").status_code == 401
    bad = {"Authorization": "Bearer fwa_wrong"}
    assert collector.client.get("/api/v1/hosts", headers=bad).status_code == 401
    hosts = collector.client.get("/api/v1/hosts", headers=collector.admin).json()
    assert [h["name"] for h in hosts] == ["spark-01"]
    assert collector.client.get("/healthz").json() == {"status": "ok", "leader": False}


def test_host_detail_shows_heartbeat_boot_and_latest_sample(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    assert (
        collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()["status"]
        == "unknown"
    )
    post(collector, token, batch(samples=[sample(1, 30 * 2**30), sample(2, 20 * 2**30)]))
    detail = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert detail["status"] == "up"
    assert detail["boot_id"] == BOOT
    assert detail["agent"]["pid"] == 4242
    assert detail["latest_sample"]["mem_available"] == 20 * 2**30
    assert collector.client.get("/api/v1/hosts/nope", headers=collector.admin).status_code == 404


def test_one_batch_ingested_twice_at_once_is_stored_once(db_url: str) -> None:
    """A retry racing its original (the agent timed out on a slow commit): the second
    transaction meets the first one's uncommitted rows, waits, and after the commit counts
    every record as a duplicate. On PostgreSQL that is the optimistic COPY failing on a
    unique violation and falling back, on SQLite the second writer waiting its turn."""
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    factory = db.make_sessionmaker(engine)
    settings = Settings(db_url=db_url)
    with db.session_scope(factory) as session:
        host_id = hosts.create_host(session, name="spark-01")[0].id
    wire = Batch.model_validate(batch(lines=[kline(s, 1000 + s) for s in range(1, 301)]))
    first_stored, second_started = threading.Event(), threading.Event()
    stored: dict[str, int] = {}

    def ingest(name: str) -> None:
        with db.session_scope(factory) as session:
            if name == "second":
                second_started.set()
            result = ingest_batch(
                session,
                host_id=host_id,
                batch=wire,
                received_at=1764400400.0,
                now=from_epoch(1764400400.0),
                settings=settings,
            )
            stored[name] = result.stored.lines
            if name == "first":
                first_stored.set()
                second_started.wait(10)
                time.sleep(0.3)  # let the second reach the rows it must wait for

    first = threading.Thread(target=ingest, args=("first",))
    first.start()
    assert first_stored.wait(10)
    second = threading.Thread(target=ingest, args=("second",))
    second.start()
    first.join(30)
    second.join(30)
    with db.session_scope(factory) as session:
        count = session.scalar(select(func.count()).select_from(Line))
    engine.dispose()
    assert stored == {"first": 300, "second": 0}
    assert count == 300
