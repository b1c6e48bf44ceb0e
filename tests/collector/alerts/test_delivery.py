"""The alert outbox: signed delivery, retries with backoff, survival across restarts."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta
from functools import partial

import httpx
from sqlalchemy import select
from standardwebhooks import Webhook

from collector import db
from collector.alerts import delivery as webhooks
from collector.alerts import targets
from collector.liveness import checker
from collector.models import Delivery
from collector.settings import Settings
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import BOOT_B, SECRET, factory, kline, post, receiver, sample
from tests.support.ports import free_port


def lose(c: Collector) -> int:
    opened = checker.check_heartbeats(
        factory(c),
        now=utcnow() + timedelta(seconds=10),
        settings=c.settings,
        probe_runner=lambda _t: [],
    )
    return opened[0]


def deliver(c: Collector, now_offset_s: float = 11.0, since: datetime | None = None) -> list[int]:
    """Run the sender `now_offset_s` after `since` (default: the wall clock now). Tests that
    compare several runs pass one `since`, so a slow machine cannot move them apart."""
    with httpx.Client() as http:
        return webhooks.deliver_due_alerts(
            factory(c),
            now=(since or utcnow()) + timedelta(seconds=now_offset_s),
            http_client=http,
            settings=c.settings,
            rng=random.Random(1),
        )


def test_signature_is_standard_webhooks() -> None:
    body = '{"event":"incident.opened"}'
    ts = int(time.time())
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": webhooks.sign(SECRET, "msg_1", ts, body),
    }
    assert Webhook(SECRET).verify(body, headers) == {"event": "incident.opened"}
    assert webhooks.new_secret().startswith("whsec_")


def test_opened_alert_payload_and_retry_after_500(collector: Collector) -> None:
    with receiver(statuses=[500]) as rec:
        r = collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": SECRET}, headers=collector.admin
        )
        assert r.status_code == 201 and r.json()["has_secret"] is True
        token = collector.add_host("spark-01")
        post(
            collector,
            token,
            "spark-01",
            samples=[sample(1, time.time())],
            lines=[kline(1, time.time(), "watchdog: BUG: soft lockup - CPU#3 stuck for 22s!")],
        )
        iid = lose(collector)
        t0 = utcnow()
        assert deliver(collector, since=t0) == []  # 500
        assert deliver(collector, since=t0) == []  # not due yet: backing off
        later = 11 + collector.settings.webhook_backoff_base_s
        delivered = deliver(collector, now_offset_s=later, since=t0)
        assert len(delivered) == 1 and rec.bad_signatures == 0
        body = rec.received[0]["body"]
        assert body["event"] == "incident.opened"
        assert body["host"]["name"] == "spark-01"
        assert body["incident"]["id"] == iid and body["incident"]["kind"] == "unreachable"
        assert body["last_sample"]["seq"] == 1
        assert "soft lockup" in body["kernel_lines"][0]["text"]
        assert body["url"] == f"{collector.settings.base_url}/incidents/{iid}"
        detail = collector.client.get(f"/api/v1/incidents/{iid}", headers=collector.admin).json()
        [d] = detail["deliveries"]
        assert (d["state"], d["attempts"]) == ("delivered", 2)
        assert [e["status"] for e in d["log"]] == [500, 200]


def test_gives_up_after_the_retry_window(collector: Collector) -> None:
    collector.client.post(
        "/api/v1/webhooks",
        json={"url": f"http://127.0.0.1:{free_port()}/"},
        headers=collector.admin,
    )
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    lose(collector)
    deliver(collector)
    deliver(collector, now_offset_s=25 * 3600)
    with db.session_scope(factory(collector)) as s:
        row = s.scalar(select(Delivery))
        assert row is not None and row.state == "failed" and row.attempts == 2
        assert "ConnectError" in (row.last_error or "")


def test_outbox_row_survives_restart_and_delivers_once(sqlite_url: str) -> None:
    with receiver(statuses=[503]) as rec:
        gen = make_collector(sqlite_url, webhook_urls=f"{rec.url}|json|{SECRET}")
        c = next(gen)
        token = c.add_host("spark-01")
        post(c, token, "spark-01")
        lose(c)
        assert deliver(c) == []  # 503: stays in the outbox
        gen.close()  # collector restarts with the alert undelivered

        gen = make_collector(sqlite_url, webhook_urls=f"{rec.url}|json|{SECRET}")
        c2 = next(gen)
        assert len(deliver(c2, now_offset_s=14)) == 1
        assert deliver(c2, now_offset_s=30) == []
        assert rec.events() == ["incident.opened"] and rec.bad_signatures == 0
        gen.close()


def test_slack_format_and_unsigned_target(collector: Collector) -> None:
    with receiver(secret=None) as rec:
        collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "format": "slack"}, headers=collector.admin
        )
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01")
        lose(collector)
        deliver(collector)
        [got] = rec.received
        assert got["body"]["text"].startswith("freezewatch: spark-01 is silent (unreachable)")
        assert "webhook-signature" not in got["headers"] and got["headers"]["webhook-id"]


def test_gpu_fault_kernel_line_alerts_once_per_cooldown(collector: Collector) -> None:
    with receiver() as rec:
        collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": SECRET}, headers=collector.admin
        )
        token = collector.add_host("spark-01")
        xid = "NVRM: Xid (PCI:000f:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
        post(
            collector,
            token,
            "spark-01",
            lines=[kline(1, time.time(), xid), kline(2, time.time(), "usb 1-1: new device")],
        )
        post(collector, token, "spark-01", lines=[kline(3, time.time(), xid)])
        deliver(collector, now_offset_s=0.5)
        [got] = rec.received
        assert got["body"]["event"] == "kernel.event"
        assert got["body"]["kernel_event"]["kind"] == "xid"
        assert got["body"]["kernel_event"]["xid"] == 79


def test_env_targets_sync_and_webhooks_crud(collector: Collector) -> None:
    settings = Settings(webhook_urls="http://a/|slack, http://b/|json|" + SECRET)
    with db.session_scope(factory(collector)) as s:
        synced = targets.sync_env_targets(s, settings=settings)
        assert [(t.url, t.format, bool(t.secret)) for t in synced] == [
            ("http://a/", "slack", False),
            ("http://b/", "json", True),
        ]
    api, admin = collector.client, collector.admin
    listed = api.get("/api/v1/webhooks", headers=admin).json()
    assert {t["source"] for t in listed} == {"env"}
    assert api.delete(f"/api/v1/webhooks/{listed[0]['id']}", headers=admin).status_code == 409
    created = api.post("/api/v1/webhooks", json={"url": "http://c/"}, headers=admin).json()
    patched = api.patch(
        f"/api/v1/webhooks/{created['id']}", json={"enabled": False}, headers=admin
    ).json()
    assert patched["enabled"] is False
    assert api.delete(f"/api/v1/webhooks/{created['id']}", headers=admin).status_code == 204
    assert api.post("/api/v1/webhooks", json={"url": "ftp://x"}, headers=admin).status_code == 422


def test_a_sender_killed_mid_post_resends_soon_and_never_after_the_resolved(
    collector: Collector,
) -> None:
    """kill -9 of the collector while incident.opened is in flight: the row stays `sending`.
    The host comes back; its resolved waits for the opened, which goes again (same id) once
    the short lease is over, and only then the resolved."""
    with receiver() as rec:
        collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": SECRET}, headers=collector.admin
        )
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01")
        iid = lose(collector)
        sf, settings = factory(collector), collector.settings
        t0 = utcnow()
        claimed_at = t0 + timedelta(seconds=11)
        with db.session_scope(sf) as s:  # what the killed sender left: claimed, unanswered
            (opened,) = s.scalars(select(Delivery))
            assert webhooks._claim(s, opened.id, claimed_at, settings)
            opened_id = opened.msg_id
        post(collector, token, "spark-01", boot=BOOT_B)  # back: the resolved is queued
        lease = webhooks.lease_s(settings)
        assert lease < 30  # short: not the 40 s it used to be
        assert deliver(collector, now_offset_s=11 + lease - 1, since=t0) == []  # resolved waits
        assert rec.received == []
        over = 11 + lease + 0.1
        assert len(deliver(collector, now_offset_s=over, since=t0)) == 1  # the opened again
        assert len(deliver(collector, now_offset_s=over, since=t0)) == 1  # now the resolved
        assert rec.events() == ["incident.opened", "incident.resolved"]
        assert rec.ids()[0] == opened_id  # the same webhook-id: at least once, keyed by it
        with db.session_scope(sf) as s:
            assert {d.state for d in s.scalars(select(Delivery))} == {"delivered"}
            assert s.scalar(select(Delivery.incident_id).limit(1)) == iid


def test_a_resolved_never_overtakes_an_opened_that_is_retrying(collector: Collector) -> None:
    with receiver(statuses=[503]) as rec:
        collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": SECRET}, headers=collector.admin
        )
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01")
        lose(collector)
        assert deliver(collector) == []  # the opened got a 503: backing off
        post(collector, token, "spark-01", boot=BOOT_B)
        sf = factory(collector)
        with db.session_scope(sf) as s:
            opened = select(Delivery.next_attempt_at).where(Delivery.event == "incident.opened")
            retry_at = s.scalar(opened)
        assert retry_at is not None
        with httpx.Client() as http:
            step = partial(
                webhooks.deliver_due_alerts, sf, http_client=http, settings=collector.settings
            )
            assert step(now=retry_at - timedelta(seconds=0.1)) == []  # the resolved waits
            assert len(step(now=retry_at)) == 1  # the opened, at last
            assert len(step(now=retry_at)) == 1  # then the resolved
        assert rec.events() == ["incident.opened", "incident.resolved"]
