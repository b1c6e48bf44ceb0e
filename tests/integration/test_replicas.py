"""Two collector processes on one real PostgreSQL behind a round-robin proxy (the HA layout of
docker-compose.yml): every batch of a host alternates between them.

- What they derive equals what one collector derives from the same batches: kernel events, the
  vLLM startup plan, each hang verdict once, the incident and its resolution.
- The leader stopped gracefully and restarted while every host is healthy: no incident, no alert.
- The leader killed (-9) while a host is silent: the other takes over, and there is exactly one
  incident and one alert per target; the killed one restarted joins without a reset.
- Ingest through either replica is exactly once: the same batch through both is stored once
  and counted as duplicates; every kernel line of the real agents is stored once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from agent.wire import INGEST_PATH
from collector import db
from collector.models import CollectorRun, Host, Line
from tests.collector.freeze_support import SECRET, Receiver, receiver
from tests.collector.ingest.test_derive import MTP_LOG, vllm_lines, vllm_sample
from tests.support.fleet import CollectorProcess, append_kmsg, register, start_agent, stop_all
from tests.support.postgres import drop_database, fresh_database
from tests.support.real_corpus import REAL, load
from tests.support.rr_proxy import RoundRobinProxy
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(420)

HOST = "spark-rr"
HANG_S = 3.0  # FREEZEWATCH_VLLM_HANG_S here: a stall of a few seconds of samples is a hang
KERNEL_FILES = (
    "nvsentinel-fallen-off-bus.txt",
    "gpud-dmesg-xid-119.txt",
    "ogkm-1230-gsp-timeout.txt",
)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[str]:
    url = fresh_database(postgres_url)
    yield url
    drop_database(url)


def leaders(collectors: list[CollectorProcess]) -> list[CollectorProcess]:
    out = []
    for c in collectors:
        if c.proc is None:
            continue
        try:
            if httpx.get(c.url + "/healthz", timeout=2).json()["leader"]:
                out.append(c)
        except httpx.HTTPError:
            pass
    return out


def the_leader(collectors: list[CollectorProcess]) -> CollectorProcess:
    found = wait_for(lambda: leaders(collectors), 30, 0.2, what="a leader")
    assert len(found) == 1, "two leaders at once"
    return found[0]


def incidents(c: CollectorProcess) -> list[dict[str, Any]]:
    return c.api("/api/v1/incidents")  # type: ignore[return-value]


def statuses(c: CollectorProcess) -> dict[str, str]:
    return {h["name"]: h["status"] for h in c.api("/api/v1/hosts")}  # type: ignore[attr-defined]


def stored_lines(db_url: str) -> dict[str, tuple[int, int]]:
    """host → (rows, distinct kseqs) of its kernel lines."""
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(Host.name, func.count(), func.count(func.distinct(Line.kseq)))
                .join(Line, Line.host_id == Host.id)
                .group_by(Host.name)
            )
            return {name: (n, distinct) for name, n, distinct in rows}
    finally:
        engine.dispose()


def pair(db_url: str, tmp_path: Path, **env: str) -> list[CollectorProcess]:
    collectors = [
        CollectorProcess(db_url, tmp_path / f"collector-{i}.log", **env) for i in range(2)
    ]
    for c in collectors:
        c.start()
    return collectors


class Feeder:
    """One kernel record a second into each agent's kmsg; knows how many each got."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs, self.count = dirs, dict.fromkeys(dirs, 0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for name, path in self.dirs.items():
                append_kmsg(path / "kmsg", range(self.count[name], self.count[name] + 1))
                self.count[name] += 1


def alerts(rec: Receiver) -> list[tuple[str, str, str]]:
    return [(r["body"]["event"], r["body"]["host"]["name"], r["id"]) for r in rec.received]


def test_leader_stopped_then_killed_while_a_host_is_silent(pg: str, tmp_path: Path) -> None:
    frozen, healthy = "frozen", ["healthy-0", "healthy-1"]
    names = [frozen, *healthy]
    tokens = register(pg, names)
    dirs = {n: tmp_path / n for n in names}
    with receiver() as one, receiver() as two:
        targets = f"{one.url}|json|{SECRET},{two.url}|json|{SECRET}"
        collectors = pair(pg, tmp_path, FREEZEWATCH_WEBHOOK_URLS=targets)
        agents: dict[str, subprocess.Popen[bytes]] = {}
        feeder = Feeder(dirs)
        with RoundRobinProxy([c.url for c in collectors]) as proxy:
            try:
                for n in names:
                    agents[n] = start_agent(proxy.url, tokens[n], n, dirs[n])
                survivor = collectors[0]
                wait_for(lambda: set(statuses(survivor).values()) == {"up"}, 90, 0.5)
                feeder.thread.start()

                # 1. The leader stops gracefully and comes back: the other one leads meanwhile.
                leader = the_leader(collectors)
                leader.stop(signal.SIGTERM)
                other = the_leader(collectors)
                assert other is not leader
                leader.start()
                time.sleep(3.0 + 5.0 + 2)  # grace + the agents' longest retry + margin
                assert the_leader(collectors) is other
                assert incidents(other) == [] and one.received == [] and two.received == []
                assert set(statuses(other).values()) == {"up"}

                # 2. A host freezes; its silence has begun when the leader is killed.
                agents[frozen].send_signal(signal.SIGSTOP)
                time.sleep(1.0)
                other.stop(signal.SIGKILL)
                survivor = the_leader(collectors)
                found = wait_for(lambda: incidents(survivor), 30, 0.2, what="the incident")
                wait_for(lambda: one.received and two.received, 30, 0.2, what="the alerts")
                other.start()  # the killed one comes back: it joins, it resets nothing
                time.sleep(4.0)  # a second incident or alert would have come by now
                assert len(found) == 1 and found[0]["host"] == frozen
                assert found[0]["collector_down"] is False
                assert [i["host"] for i in incidents(survivor)] == [frozen]
                assert {n for n, s in statuses(survivor).items() if s != "up"} == {frozen}

                # 3. It comes back: one resolved alert per target.
                agents[frozen].send_signal(signal.SIGCONT)
                wait_for(lambda: incidents(survivor)[0]["state"] == "resolved", 60, 0.5)
                wait_for(lambda: len(one.received) >= 2 and len(two.received) >= 2, 30, 0.2)
                time.sleep(2.0)
                feeder.stop.set()
                feeder.thread.join(5)
                expected = dict(feeder.count)
                wait_for(lambda: {n: v[1] for n, v in stored_lines(pg).items()} == expected, 60)
            finally:
                feeder.stop.set()
                if frozen in agents:
                    agents[frozen].send_signal(signal.SIGCONT)
                stop_all(list(agents.values()))
                for c in collectors:
                    c.stop()
        assert min(proxy.sent.values()) > 0 and len(proxy.sent) == 2  # both took batches
    for rec in (one, two):
        assert rec.bad_signatures == 0
        events = alerts(rec)
        assert [(e, h) for e, h, _id in events] == [
            ("incident.opened", frozen),
            ("incident.resolved", frozen),
        ]
    assert all(rows == distinct for rows, distinct in stored_lines(pg).values())  # none twice
    engine = db.make_engine(pg)
    try:
        with engine.connect() as conn:
            joined = conn.execute(select(CollectorRun.joined).order_by(CollectorRun.id)).scalars()
            assert list(joined) == [False, True, True, True]  # only the first start was downtime
    finally:
        engine.dispose()


def test_the_same_batch_through_both_replicas_is_stored_once(pg: str, tmp_path: Path) -> None:
    token = register(pg, [HOST])[HOST]
    collectors = pair(pg, tmp_path, FREEZEWATCH_RUN_SCHEDULER="false")
    try:
        body = Script(HOST).batch(lines=[_kline(k) for k in range(50)]) | {"samples": [_sample(0)]}
        results: list[dict[str, Any]] = []

        def send(c: CollectorProcess) -> None:
            results.append(_post(c.url, token, body).json())

        threads = [threading.Thread(target=send, args=(c,)) for c in collectors]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        later = _post(collectors[1].url, token, body).json()  # a retry after a lost answer
    finally:
        for c in collectors:
            c.stop()
    stored = sorted(r["stored"]["lines"] for r in results)
    assert stored == [0, 50] and sorted(r["duplicates"]["lines"] for r in results) == [0, 50]
    assert later["stored"] == {"samples": 0, "lines": 0, "events": 0}
    assert later["duplicates"] == {"samples": 1, "lines": 50, "events": 0}
    assert stored_lines(pg) == {HOST: (50, 50)}


def _kline(k: int) -> dict[str, Any]:
    text = f"fleet record {k}"
    return {"seq": k, "ts": time.time(), "source": "kmsg", "priority": 6, "kseq": k, "text": text}


def _sample(seq: int) -> dict[str, Any]:
    return {"seq": seq, "ts": time.time(), "mem": {"MemTotal": 2**37, "MemAvailable": 2**36}}


def _post(url: str, token: str, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(
        url + INGEST_PATH,
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


class Script:
    """A scripted agent: a metrics sample every half second of its clock whatever the pace of
    its POSTs (as the agent samples), sent in batches built once for every collector under
    test alike. Its vLLM engine moves, stalls for longer than ``HANG_S``, then moves again."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.started = time.time()
        self.seq = 0
        self.last_ts = self.started
        self.stall = (self.started + 2.0, self.started + 2.0 + HANG_S + 1.5)

    def tokens(self, ts: float) -> float:
        if ts < self.stall[0]:
            return 100.0 + 20 * (ts - self.started)
        return 200.0 if ts < self.stall[1] else 1000.0 + ts

    def samples_until(self, now: float) -> list[dict[str, Any]]:
        out = []
        while self.last_ts + 0.5 <= now:
            self.last_ts += 0.5
            self.seq += 1
            out.append(vllm_sample(self.seq, self.last_ts, 2, self.tokens(self.last_ts), 12.0))
        return out

    def batch(self, *, lines: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {
            "host": self.host,
            "boot_id": "b6f5a1c2-1111-4d4e-9f8a-1b2c3d4e5f60",
            "agent": {"version": "test", "pid": 1, "started_at": self.started},
            "samples": self.samples_until(time.time()),
            "lines": lines or [],
            "events": [],
        }


def scripted_batches(script: Script) -> Iterator[dict[str, Any]]:
    """Live-like batches: the vLLM log a few lines at a time, real kernel lines from the
    corpus, until the engine's stall is over and every line is out."""
    vllm = vllm_lines(MTP_LOG, seq0=10_000)
    kernel = [line for name in KERNEL_FILES for line in load(REAL / "kernel" / name).lines]
    i = 0
    while i * 3 < len(vllm) or i * 4 < len(kernel) or script.last_ts < script.stall[1] + 1:
        now = time.time()
        lines = [{**line, "ts": now} for line in vllm[i * 3 : i * 3 + 3]]
        for k in range(i * 4, min(i * 4 + 4, len(kernel))):
            text = kernel[k]
            lines.append(
                {"seq": k, "ts": now, "source": "kmsg", "priority": 3, "kseq": k, "text": text}
            )
        yield script.batch(lines=lines)
        i += 1


def derived(c: CollectorProcess) -> dict[str, Any]:
    events = c.api(f"/api/v1/hosts/{HOST}/events?limit=500")["events"]  # type: ignore[index]
    status: Any = c.api(f"/api/v1/hosts/{HOST}/vllm")
    plan = {k: v for k, v in status["plan"].items() if k not in ("id", "started_ts")}
    return {
        "kernel": sorted(
            (e["kind"], e["code"], e["line"]["text"]) for e in events if e["type"] == "kernel"
        ),
        "host_events": sorted(e["kind"] for e in events if e["type"] == "host"),
        "hangs": sorted(e["kind"] for e in events if e["kind"] in ("vllm_hung", "vllm_resumed")),
        "plans": len(status["plans"]),
        "plan": plan,
        "incidents": [(i["kind"], i["state"], i["resolution"]) for i in incidents(c)],
    }


def test_round_robin_replicas_derive_what_one_collector_derives(
    postgres_url: str, pg: str, tmp_path: Path
) -> None:
    alone_db = fresh_database(postgres_url)
    # A grace longer than the default 3 s: the loop below posts to three collectors and reads
    # two, and on a loaded machine (CI once) one round took over 3 s after the first
    # collector had resolved its incident: it opened a second one, the pair (still open) did not.
    env = {"FREEZEWATCH_VLLM_HANG_S": str(HANG_S), "FREEZEWATCH_GRACE_S": "8"}
    try:
        pair_token = register(pg, [HOST])[HOST]
        alone_token = register(alone_db, [HOST])[HOST]
        collectors = pair(pg, tmp_path, **env)
        alone = CollectorProcess(alone_db, tmp_path / "alone.log", **env)
        alone.start()
        script = Script(HOST)
        with RoundRobinProxy([c.url for c in collectors]) as proxy:
            try:
                for body in scripted_batches(script):
                    _post(proxy.url, pair_token, body)
                    _post(alone.url, alone_token, body)
                    time.sleep(0.25)
                # A silence both call a freeze; then the samples from inside it come first.
                wait_for(lambda: incidents(alone) and incidents(collectors[0]), 60, 0.2)
                for _ in range(60):
                    beat = script.batch()
                    _post(proxy.url, pair_token, beat)
                    _post(alone.url, alone_token, beat)
                    if all(incidents(c)[0]["state"] == "resolved" for c in (alone, collectors[0])):
                        break
                    time.sleep(0.5)
                one, turns = derived(alone), derived(collectors[0])
            finally:
                alone.stop()
                for c in collectors:
                    c.stop()
        assert proxy.sent[0] > 3 and proxy.sent[1] > 3  # both replicas took turns
    finally:
        drop_database(alone_db)
    assert one["plan"]["kv_cache_tokens"] == 5_747_892
    assert one["hangs"] == ["vllm_hung", "vllm_resumed"]
    assert len(one["kernel"]) >= 3 and one["incidents"][0][1] == "resolved"
    assert turns == one
