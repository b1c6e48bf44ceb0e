"""A collector restart raises no false alarm and hides no freeze: 21 real agents, the real
collector process stopped for 20 s by SIGTERM and then by kill -9, on SQLite and PostgreSQL.

Counted exactly: incidents, signed webhooks, and every kernel line of every host (stored once).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from collector import db
from collector.models import Host, Incident, Line
from tests.collector.freeze_support import SECRET, receiver
from tests.support.fleet import CollectorProcess, append_kmsg, register, start_agent, stop_all
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(420)

DOWN_S = 20.0
HOLD_S = 10.0  # FREEZEWATCH_RESTART_ALERT_HOLD_S for this test (30 s by default)
STARTUP_GRACE_S = 5.0 + 3.0  # the agents' longest retry delay + the default grace
FLEET = [f"fleet-{i:02d}" for i in range(20)]
FROZEN = "frozen"


class Feeder:
    """Appends one kernel record a second to every host's kmsg; knows how many each got."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs, self.count = dirs, dict.fromkeys(dirs, 0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for name, path in self.dirs.items():
                append_kmsg(path / "kmsg", range(self.count[name], self.count[name] + 1))
                self.count[name] += 1


def statuses(c: CollectorProcess) -> dict[str, str]:
    return {h["name"]: h["status"] for h in c.api("/api/v1/hosts")}  # type: ignore[attr-defined]


def incidents(c: CollectorProcess) -> list[dict[str, Any]]:
    return c.api("/api/v1/incidents")  # type: ignore[return-value]


def explain(c: CollectorProcess, dirs: dict[str, Path], since: float) -> str:
    """What a failure needs: each incident's times (wall clock, relative to ``since``) and the
    tail of its host's agent log."""
    out = []
    for i in incidents(c):
        times = {k: round(i[k] - since, 2) for k in ("last_heartbeat_at", "opened_at") if i[k]}
        log = (dirs[i["host"]] / "agent.log").read_text()[-600:]
        out.append(f"{i['host']} {i['state']} {times}\n{log}")
    return "\n".join(out) + c.log.read_text()[-1500:]


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


def test_restart_by_sigterm_and_kill_9_no_false_alarm_and_a_real_freeze_still_alerts(
    db_url: str, tmp_path: Path
) -> None:
    names = [*FLEET, FROZEN]
    tokens = register(db_url, names)
    dirs = {name: tmp_path / name for name in names}
    with receiver() as rec:
        collector = CollectorProcess(
            db_url,
            tmp_path / "collector.log",
            FREEZEWATCH_WEBHOOK_URLS=f"{rec.url}|json|{SECRET}",
            FREEZEWATCH_RESTART_ALERT_HOLD_S=str(HOLD_S),
        )
        collector.start()
        agents: dict[str, subprocess.Popen[bytes]] = {}
        feeder = Feeder(dirs)
        try:
            for n in names:
                agents[n] = start_agent(collector.url, tokens[n], n, dirs[n])
            wait_for(lambda: set(statuses(collector).values()) == {"up"}, 120, 0.5)
            feeder.thread.start()

            # 1. SIGTERM, down 20 s, back: every agent reconnects, nobody is declared late.
            collector.stop(signal.SIGTERM)
            time.sleep(DOWN_S)
            collector.start()
            back, wall = time.monotonic(), time.time()
            wait_for(lambda: set(statuses(collector).values()) == {"up"}, 60, 0.5)
            time.sleep(max(0.0, back + STARTUP_GRACE_S + HOLD_S + 3 - time.monotonic()))
            assert incidents(collector) == [], explain(collector, dirs, wall)
            assert rec.received == []

            # 2. kill -9, and one host really freezes while the collector is down.
            collector.stop(signal.SIGKILL)
            agents[FROZEN].send_signal(signal.SIGSTOP)
            time.sleep(DOWN_S)
            starting, started = time.time(), time.monotonic()
            collector.start()
            wall = time.time()
            found = wait_for(lambda: incidents(collector), 60, 0.5)
            assert len(found) == 1, explain(collector, dirs, wall)
            opened = found[0]
            assert opened["host"] == FROZEN and opened["kind"] == "unreachable"
            assert opened["collector_down"] is True
            # Held, unless the replays kept ingest behind past the hold (then no need to wait).
            assert opened["alert_held_until"] is not None or (
                opened["opened_at"] >= starting + HOLD_S
            )
            wait_for(lambda: rec.received, HOLD_S + 30, 0.2)  # still silent after the hold
            # The hold counts from the collector's start, before it answered (start() returns
            # then: seconds later on a loaded machine).
            assert time.monotonic() - started >= HOLD_S - 1
            up = statuses(collector)
            assert {n for n, s in up.items() if s != "up"} == {FROZEN}
            assert [i["host"] for i in incidents(collector)] == [FROZEN], explain(
                collector, dirs, wall
            )

            agents[FROZEN].send_signal(signal.SIGCONT)  # the host comes back on its own
            wait_for(lambda: incidents(collector)[0]["state"] == "resolved", 60, 0.5)
            wait_for(lambda: len(rec.received) >= 2, 30, 0.2)
            time.sleep(2)  # anything else queued would have gone by now
            feeder.stop.set()
            feeder.thread.join(5)
            expected = dict(feeder.count)
            wait_for(
                lambda: {n: v[1] for n, v in stored_lines(db_url).items()} == expected, 60, 0.5
            )
        finally:
            feeder.stop.set()
            if FROZEN in agents:
                agents[FROZEN].send_signal(signal.SIGCONT)
            stop_all(list(agents.values()))
            collector.stop()
    assert rec.bad_signatures == 0
    bodies = [r["body"] for r in rec.received]
    assert [(b["event"], b["host"]["name"]) for b in bodies] == [
        ("incident.opened", FROZEN),
        ("incident.resolved", FROZEN),
    ]
    assert bodies[1]["incident"]["resolution"] == "stall"
    lines = stored_lines(db_url)
    assert all(rows == distinct for rows, distinct in lines.values())  # none twice


def test_a_slow_shutdown_judges_no_host(tmp_path: Path) -> None:
    """Between SIGTERM and the end of the lifespan (uvicorn waits up to 5 s for requests in
    progress) no batch is taken: the checker must not call that silence."""
    db_url = f"sqlite:///{tmp_path / 'fw.db'}"
    token = register(db_url, ["spark-stop"])["spark-stop"]
    collector = CollectorProcess(db_url, tmp_path / "collector.log")
    collector.start()
    agent = start_agent(collector.url, token, "spark-stop", tmp_path / "agent")
    stuck = socket.create_connection(("127.0.0.1", collector.port))
    try:
        wait_for(lambda: statuses(collector) == {"spark-stop": "up"}, 60, 0.2)
        stuck.sendall(  # a request in progress: the graceful shutdown waits for it
            f"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Length: 1000\r\n\r\n{".encode()
        )
        time.sleep(0.5)
        started = time.monotonic()
        collector.stop(signal.SIGTERM)
        assert time.monotonic() - started > 4  # it did take the graceful time
    finally:
        stuck.close()
        stop_all([agent])
        collector.stop()
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(Incident)).scalar_one() == 0
    finally:
        engine.dispose()
