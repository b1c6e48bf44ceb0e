"""Probing ahead of grace, with an injected clock, on SQLite and PostgreSQL.

The rule (collector.liveness.heartbeat): probes start after ``grace - lead`` of silence, the
incident opens at grace from them, a host heard from before grace leaves nothing behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import time_machine
from sqlalchemy import func, select

from collector import db
from collector.alerts import delivery as webhooks
from collector.liveness import checker
from collector.liveness.preprobes import PreProbes, lead_s
from collector.models import Delivery, Host, Incident
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, post, receiver


class InlineExecutor(Executor):
    """Runs each submitted call at once: a pre-probe is finished when ``start`` returns."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class Runner:
    """A probe runner that records its calls; call n answers SSH with boot_id ``call-n``."""

    def __init__(
        self, ssh_ok: bool = True, delay_s: float = 0.0, gate: threading.Event | None = None
    ) -> None:
        self.calls: list[str] = []
        self.ssh_ok = ssh_ok
        self.delay_s = delay_s
        self.gate = gate

    def __call__(self, target: Any) -> list[dict[str, Any]]:
        self.calls.append(target.name)
        if self.gate is not None:
            self.gate.wait(30)
            time.sleep(0.01)  # the checker's wait is measurably above zero
        if self.delay_s:
            time.sleep(self.delay_s)
        detail = f"boot_id call-{len(self.calls)}"
        return [{"name": "ssh", "ok": self.ssh_ok, "detail": detail, "duration_s": 0.01}]


@pytest.fixture
def clock() -> Iterator[Any]:
    with time_machine.travel(utcnow(), tick=False) as traveller:
        yield traveller


def sweep(c: Collector, now: datetime, runner: Runner, pre: PreProbes | None) -> list[int]:
    return checker.check_heartbeats(
        factory(c), now=now, settings=c.settings, probe_runner=runner, pre_probes=pre
    )


def incident_rows(c: Collector) -> list[Incident]:
    with db.session_scope(factory(c)) as s:
        rows = list(s.scalars(select(Incident).order_by(Incident.id)))
        s.expunge_all()
        return rows


def test_lead_is_at_most_half_the_grace() -> None:
    assert lead_s(3.0, 1.0) == 1.0
    assert lead_s(1.0, 1.0) == 0.5
    assert lead_s(3.0, 0.0) == 0.0


def test_discard_drops_only_the_silence_it_names() -> None:
    pre = PreProbes(executor=InlineExecutor())
    old, new = utcnow(), utcnow() + timedelta(seconds=5)
    assert pre.start(1, old, list) and not pre.start(1, old, list)
    assert pre.start(1, new, list)  # a newer silence replaces the old one
    pre.discard(1, old, cleared=True)  # judged on the old silence: must not drop the new one
    assert pre.pending() == {1: new} and pre.cleared == 0
    assert pre.take(1, old) is None and pre.pending() == {}


def test_probes_start_at_grace_minus_lead(collector: Collector, clock: Any) -> None:
    settings, runner, pre = collector.settings, Runner(), PreProbes(executor=InlineExecutor())
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    last = utcnow()
    suspect_at = last + timedelta(seconds=settings.grace_s - settings.probe_lead_s)
    assert sweep(collector, suspect_at - timedelta(milliseconds=1), runner, pre) == []
    assert runner.calls == []
    assert sweep(collector, suspect_at, runner, pre) == []
    assert runner.calls == ["spark-01"]
    # Later sweeps inside the same silence do not probe again.
    assert sweep(collector, suspect_at + timedelta(seconds=0.5), runner, pre) == []
    assert runner.calls == ["spark-01"] and pre.started == 1
    with db.session_scope(factory(collector)) as s:
        assert s.scalar(select(Host.status)) == "up"  # suspect is no host status


def test_host_heard_from_before_grace_opens_nothing_and_sends_no_alert(
    collector: Collector, clock: Any
) -> None:
    settings, runner, pre = collector.settings, Runner(), PreProbes(executor=InlineExecutor())
    grace = timedelta(seconds=settings.grace_s)
    with receiver() as rec:
        collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": rec.secret}, headers=collector.admin
        )
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01")
        first = utcnow()
        clock.shift(settings.grace_s - settings.probe_lead_s)
        sweep(collector, utcnow(), runner, pre)
        assert runner.calls == ["spark-01"]
        clock.shift(settings.probe_lead_s / 2)
        post(collector, token, "spark-01")  # back before grace
        assert sweep(collector, first + grace, runner, pre) == []
        assert pre.cleared == 1 and pre.pending() == {}
        with httpx.Client() as http:
            webhooks.deliver_due_alerts(
                factory(collector), now=first + grace, http_client=http, settings=settings
            )
        assert incident_rows(collector) == [] and rec.received == []
        with db.session_scope(factory(collector)) as s:
            assert s.scalar(select(func.count()).select_from(Delivery)) == 0
            assert s.scalar(select(Host.status)) == "up"


def test_probes_finished_before_grace_open_the_incident_exactly_at_grace(
    collector: Collector, clock: Any
) -> None:
    settings, runner, pre = collector.settings, Runner(), PreProbes(executor=InlineExecutor())
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    last = utcnow()
    grace_at = last + timedelta(seconds=settings.grace_s)
    sweep(collector, grace_at - timedelta(seconds=settings.probe_lead_s), runner, pre)
    opened = sweep(collector, grace_at, runner, pre)
    assert len(opened) == 1 and runner.calls == ["spark-01"]  # no second probe at grace
    [incident] = incident_rows(collector)
    assert incident.opened_at == incident.late_at == grace_at
    assert incident.last_heartbeat_at == last
    assert incident.kind == "agent_down"
    assert incident.probes == [
        {
            "name": "ssh",
            "ok": True,
            "detail": "boot_id call-1",
            "duration_s": 0.01,
            "silent_s": settings.grace_s - settings.probe_lead_s,
        }
    ]
    with db.session_scope(factory(collector)) as s:
        assert s.scalar(select(func.count()).select_from(Delivery)) == 0  # no target configured


def test_silence_after_a_return_is_probed_afresh(collector: Collector, clock: Any) -> None:
    settings, runner, pre = collector.settings, Runner(), PreProbes(executor=InlineExecutor())
    lead = settings.grace_s - settings.probe_lead_s
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    clock.shift(lead)
    sweep(collector, utcnow(), runner, pre)
    clock.shift(0.5)
    post(collector, token, "spark-01")  # slow, not dead; then silent for good
    second = utcnow()
    clock.shift(lead)
    sweep(collector, utcnow(), runner, pre)
    opened = sweep(collector, second + timedelta(seconds=settings.grace_s), runner, pre)
    assert len(opened) == 1 and len(runner.calls) == 2
    [incident] = incident_rows(collector)
    assert incident.probes[0]["detail"] == "boot_id call-2"
    assert incident.last_heartbeat_at == second


class HeldProbes(PreProbes):
    """Pre-probes whose runs finish only once the checker has asked whether they are done:
    "still running at grace" without betting on how fast this machine is."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(executor=ThreadPoolExecutor(max_workers=2))
        self.release = release

    def take(self, host_id: int, overdue_at: datetime) -> Future[Any] | None:
        future = super().take(host_id, overdue_at)
        return None if future is None else _ReleasingFuture(future, self.release)


class _ReleasingFuture(Future[Any]):
    def __init__(self, inner: Future[Any], release: threading.Event) -> None:
        super().__init__()
        self.inner, self.release = inner, release

    def done(self) -> bool:
        finished = self.inner.done()
        self.release.set()
        return finished

    def result(self, timeout: float | None = None) -> Any:
        return self.inner.result(timeout)


def test_probes_still_running_at_grace_are_waited_for(collector: Collector, clock: Any) -> None:
    release = threading.Event()
    settings, runner = collector.settings, Runner(ssh_ok=False, gate=release)
    pre = HeldProbes(release)
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    grace_at = utcnow() + timedelta(seconds=settings.grace_s)
    sweep(collector, grace_at - timedelta(seconds=settings.probe_lead_s), runner, pre)
    opened = sweep(collector, grace_at, runner, pre)
    pre.shutdown()
    assert len(opened) == 1 and runner.calls == ["spark-01"]
    [incident] = incident_rows(collector)
    assert incident.kind == "unreachable"
    assert incident.late_at == grace_at and incident.opened_at > grace_at
    assert incident.probes[0]["detail"] == "boot_id call-1"


def test_without_pre_probes_overdue_host_is_probed_at_grace(
    collector: Collector, clock: Any
) -> None:
    settings, runner = collector.settings, Runner()
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    last = utcnow()
    sweep(
        collector, last + timedelta(seconds=settings.grace_s - settings.probe_lead_s), runner, None
    )
    assert runner.calls == []
    assert len(sweep(collector, last + timedelta(seconds=settings.grace_s), runner, None)) == 1
    assert incident_rows(collector)[0].probes[0]["silent_s"] == settings.grace_s


def test_paused_host_is_not_probed_ahead(collector: Collector, clock: Any) -> None:
    settings, runner, pre = collector.settings, Runner(), PreProbes(executor=InlineExecutor())
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    collector.client.patch("/api/v1/hosts/spark-01", json={"paused": True}, headers=collector.admin)
    last = utcnow()
    sweep(
        collector, last + timedelta(seconds=settings.grace_s - settings.probe_lead_s), runner, pre
    )
    opened = sweep(collector, last + timedelta(seconds=settings.grace_s), runner, pre)
    assert runner.calls == [] and pre.started == 0
    assert [i.kind for i in incident_rows(collector) if i.id in opened] == ["paused"]


def test_two_checkers_with_pre_probes_alert_exactly_once(db_url: str) -> None:
    with receiver() as rec:
        gen = make_collector(db_url)
        c = next(gen)
        c.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": rec.secret}, headers=c.admin
        )
        tokens = [c.add_host(f"spark-{i}") for i in range(4)]
        for i, token in enumerate(tokens):
            post(c, token, f"spark-{i}")
        last = utcnow()
        suspect_at = last + timedelta(seconds=c.settings.grace_s - c.settings.probe_lead_s)
        grace_at = last + timedelta(seconds=c.settings.grace_s)
        engines = [db.make_engine(db_url) for _ in range(2)]
        factories = [db.make_sessionmaker(e) for e in engines]
        runners = [Runner(ssh_ok=False, delay_s=0.05) for _ in factories]
        pres = [PreProbes() for _ in factories]
        opened: list[int] = []
        barrier = threading.Barrier(2)

        def sweep(n: int) -> None:
            sf, runner, pre = factories[n], runners[n], pres[n]
            checker.check_heartbeats(
                sf, now=suspect_at, settings=c.settings, probe_runner=runner, pre_probes=pre
            )
            barrier.wait()
            opened.extend(
                checker.check_heartbeats(
                    sf, now=grace_at, settings=c.settings, probe_runner=runner, pre_probes=pre
                )
            )
            barrier.wait()
            with httpx.Client() as http:
                webhooks.deliver_due_alerts(
                    sf, now=grace_at + timedelta(seconds=1), http_client=http, settings=c.settings
                )

        threads = [threading.Thread(target=sweep, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:  # a loaded machine (a full test run) took over 30 s here
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a checker still running after 120 s"
        for pre in pres:
            pre.shutdown()
        for e in engines:
            e.dispose()
        # Each checker probed every host ahead of grace; one of them opened each incident.
        assert [len(r.calls) for r in runners] == [4, 4]
        assert sorted(opened) == sorted(set(opened)) and len(opened) == 4
        assert sorted(rec.events()) == ["incident.opened"] * 4
        assert len(set(rec.ids())) == 4 and rec.bad_signatures == 0
        gen.close()
