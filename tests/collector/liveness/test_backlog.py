"""A collector behind on ingest judges silence only up to what it stored: its hosts are not
declared late for batches still waiting in it (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import select

from agent.wire import INGEST_PATH
from collector import db
from collector.liveness import checker, suspects
from collector.liveness.backlog import (
    LOOP_MEMORY_S,
    LOOP_PERIOD_S,
    LOOP_TURNS,
    BacklogMiddleware,
    IngestBacklog,
)
from collector.liveness.collector_runs import start_collector_run, tick_collector_alive
from collector.liveness.preprobes import PreProbes
from collector.models import Host
from collector.remote.probes import ProbeTarget
from collector.remote.ssh import SSHClient
from collector.settings import Settings
from collector.timeutil import utcnow
from tests.collector.conftest import Collector
from tests.collector.freeze_support import factory, post
from tests.collector.liveness.test_checker import no_probes


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_lag_is_the_age_of_the_oldest_request_in_progress() -> None:
    clock = Clock()
    backlog = IngestBacklog(clock)
    assert backlog.lag_s() == 0.0
    first = backlog.arrived()
    clock.t += 1.5
    second = backlog.arrived()
    clock.t += 2.0
    assert backlog.lag_s() == 3.5
    backlog.answered(first)
    assert backlog.lag_s() == 2.0
    backlog.answered(second)
    assert backlog.lag_s() == 0.0


def test_a_client_stuck_mid_body_delays_nothing() -> None:
    """An agent whose host froze mid-POST: the wait is on it, not on us."""
    clock = Clock()
    backlog = IngestBacklog(clock)
    stuck = backlog.arrived()
    backlog.waiting_for_client(stuck, True)
    clock.t += 60.0
    assert backlog.lag_s() == 0.0
    backlog.waiting_for_client(stuck, False)  # the body came after all: now it waits on us
    clock.t += 1.0
    assert backlog.lag_s() == 1.0


def test_an_ingest_request_counts_from_the_moment_it_reaches_the_app() -> None:
    backlog = IngestBacklog()
    seen: list[float] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(0.05)
        seen.append(backlog.lag_s())

    async def nothing() -> dict[str, Any]:
        return {}

    async def drop(_message: Any) -> None:
        return None

    wrapped = BacklogMiddleware(app, backlog=backlog)
    for path in (INGEST_PATH, "/api/v1/hosts"):
        # A thread of its own: once CI's run found a loop left running in the main thread.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(
                asyncio.run, wrapped({"type": "http", "path": path}, nothing, drop)
            ).result()
    assert seen[0] >= 0.05 and seen[1] == 0.0  # only ingest is counted
    assert backlog.lag_s() == 0.0  # answered


def test_a_late_loop_counts_its_turns_for_requests_it_has_not_handed_on() -> None:
    clock = Clock()
    backlog = IngestBacklog(clock)
    backlog.loop_turned(0.0)
    clock.t += LOOP_PERIOD_S
    backlog.loop_turned(0.001)  # a timer's jitter: nothing
    assert backlog.lag_s() == 0.0
    clock.t += LOOP_PERIOD_S + 1.0
    backlog.loop_turned(1.0)
    assert backlog.lag_s() == LOOP_TURNS * 1.0
    clock.t += LOOP_PERIOD_S  # on time again, but what was read late still goes through
    backlog.loop_turned(0.0)
    assert backlog.lag_s() == LOOP_TURNS * 1.0
    for _ in range(int(LOOP_MEMORY_S / LOOP_PERIOD_S) + 1):
        clock.t += LOOP_PERIOD_S
        backlog.loop_turned(0.0)
    assert backlog.lag_s() == 0.0  # forgotten


def test_a_loop_stuck_now_counts_before_its_timer_fires() -> None:
    clock = Clock()
    backlog = IngestBacklog(clock)
    assert backlog.lag_s() == 0.0  # no loop watched: nothing overdue
    backlog.loop_turned(0.0)
    clock.t += LOOP_PERIOD_S + 0.01  # read just before the timer fires: nothing
    assert backlog.lag_s() == 0.0
    clock.t -= LOOP_PERIOD_S + 0.01
    clock.t += LOOP_PERIOD_S + 2.0
    assert backlog.lag_s() == LOOP_TURNS * 2.0


def test_a_blocked_event_loop_is_measured_and_forgotten_when_the_loop_stops() -> None:
    backlog = IngestBacklog()
    seen: list[float] = []

    async def serve() -> None:
        watch = asyncio.create_task(backlog.watch_loop())
        await asyncio.sleep(LOOP_PERIOD_S * 2)
        time.sleep(0.5)  # a store that holds the loop
        await asyncio.sleep(LOOP_PERIOD_S * 2)
        seen.append(backlog.lag_s())
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, serve()).result()
    assert seen[0] >= LOOP_TURNS * 0.4
    assert backlog.lag_s() == seen[0]  # remembered, but no longer growing: no loop to be late


def test_a_host_is_judged_late_only_past_grace_plus_the_lag(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    sf, settings = factory(collector), collector.settings
    now = utcnow() + timedelta(seconds=settings.grace_s + 1)
    pre = PreProbes()
    try:
        sweep: Any = checker.check_heartbeats
        # Ingest 2.5 s behind: the host's next batch may be one of those waiting.
        assert (
            suspects.start_pre_probes(
                sf, now=now, settings=settings, pre_probes=pre, run=no_probes, lag_s=2.5
            )
            == []
        )
        assert sweep(sf, now=now, settings=settings, probe_runner=no_probes, lag_s=2.5) == []
        with db.session_scope(sf) as s:
            assert s.scalar(select(Host.status)) == "up"
        (opened,) = sweep(sf, now=now, settings=settings, probe_runner=no_probes, lag_s=0.5)
        assert opened
    finally:
        pre.shutdown()


def test_the_leader_judges_with_the_largest_lag_of_the_live_replicas(
    collector: Collector,
) -> None:
    sf, settings = factory(collector), collector.settings
    now = utcnow()
    mine = start_collector_run(sf, now=now, settings=settings, joined=True)
    other = start_collector_run(sf, now=now, settings=settings, joined=True)
    gone = start_collector_run(sf, now=now - timedelta(seconds=60), settings=settings, joined=True)
    tick_collector_alive(sf, run_id=gone, now=now - timedelta(seconds=60), lag_s=50.0)
    assert tick_collector_alive(sf, run_id=other, now=now, lag_s=4.0) == 4.0
    assert tick_collector_alive(sf, run_id=mine, now=now, lag_s=0.0) == 4.0  # not the dead one
    assert tick_collector_alive(sf, run_id=other, now=now, lag_s=0.0) == 0.0


class SlowHealth(BaseHTTPRequestHandler):
    """A vLLM /health that answers 200 after 0.6 s: a live host, reached slowly."""

    def do_GET(self) -> None:
        time.sleep(0.6)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_collector_behind_gives_its_probes_its_lag_on_top_of_the_deadline() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowHealth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    target = ProbeTarget(name="spark-01", ssh_host=None, ssh_port=22, ssh=None, vllm_url=url)
    settings = Settings(probe_deadline_s=0.3)
    try:
        on_time = checker.prober(settings, SSHClient(), lambda: 0.0)(target)
        barely = checker.prober(settings, SSHClient(), lambda: 0.4)(target)  # under the minimum
        behind = checker.prober(settings, SSHClient(), lambda: 1.5)(target)
    finally:
        server.shutdown()
        server.server_close()
    assert [(r["name"], r["ok"]) for r in on_time] == [("vllm", False)]
    assert [(r["name"], r["ok"]) for r in barely] == [("vllm", False)]
    assert [(r["name"], r["ok"]) for r in behind] == [("vllm", True)]
