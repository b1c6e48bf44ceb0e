"""Apprise targets through the same outbox as webhooks: a real Apprise sending ``json://`` and
``form://`` to a loopback receiver, retried with backoff, delivered exactly once, filtered."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import func, select

from collector import db
from collector.alerts import outbox, targets
from collector.alerts.filters import highest, wants
from collector.alerts.notice import Notice
from collector.models import Delivery
from collector.settings import Settings
from collector.timeutil import utcnow
from tests.collector.alerts.test_delivery import deliver, lose
from tests.collector.conftest import Collector
from tests.collector.freeze_support import BOOT_B, SECRET, factory, kline, post, receiver, sample
from tests.support.http_receiver import http_receiver

XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus."


def add_target(c: Collector, url: str, **fields: object) -> dict[str, object]:
    r = c.client.post(
        "/api/v1/webhooks", json={"url": url, "format": "apprise", **fields}, headers=c.admin
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def deliveries(c: Collector) -> list[Delivery]:
    with db.session_scope(factory(c)) as s:
        rows = list(s.scalars(select(Delivery).order_by(Delivery.id)))
        s.expunge_all()
    return rows


def test_incident_through_apprise_json_retried_then_delivered_once(collector: Collector) -> None:
    with http_receiver(statuses=[500]) as rec:
        add_target(collector, f"json://127.0.0.1:{rec.port}/notify")
        token = collector.add_host("spark-01")
        now = time.time()
        post(collector, token, "spark-01", samples=[sample(1, now)], lines=[kline(1, now, XID_79)])
        rec.requests.clear()  # the kernel.event alert of the Xid is not this test's subject
        with db.session_scope(factory(collector)) as s:
            s.execute(Delivery.__table__.delete())
        iid = lose(collector)
        t0 = utcnow()
        assert deliver(collector, since=t0) == []  # 500: kept, backing off
        [failed] = deliveries(collector)
        assert (failed.state, failed.attempts) == ("pending", 1)
        assert "500" in (failed.last_error or "")
        assert deliver(collector, since=t0) == []  # not due yet
        later = 11 + collector.settings.webhook_backoff_base_s
        assert len(deliver(collector, now_offset_s=later, since=t0)) == 1
        assert deliver(collector, now_offset_s=later + 3600, since=t0) == []  # never again

        assert [r.status for r in rec.requests] == [500, 200]
        [got] = rec.accepted
        assert got.path == "/notify"
        assert got.body["type"] == "failure"
        assert got.body["title"] == "freezewatch: spark-01 is silent (unreachable)"
        message = got.body["message"]
        assert "spark-01: no heartbeat, no probe answers: suspected host freeze" in message
        assert "First kernel event: xid 79" in message
        assert message.endswith(f"{collector.settings.base_url}/incidents/{iid}")
        [row] = deliveries(collector)
        assert (row.state, row.attempts, row.event) == ("delivered", 2, "incident.opened")
        assert [e["ok"] for e in row.log] == [False, True]


def test_resolution_through_apprise_form_says_verdict_and_downtime(collector: Collector) -> None:
    with http_receiver() as rec:
        add_target(collector, f"form://127.0.0.1:{rec.port}/hook", events=["incident.resolved"])
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01", samples=[sample(1, time.time())])
        lose(collector)
        post(collector, token, "spark-01", boot=BOOT_B, samples=[sample(1, time.time())])
        deliver(collector, now_offset_s=30)
        [got] = rec.accepted  # the target takes resolutions only: no "silent" message
        assert got.body["title"] == "freezewatch: spark-01 is back (rebooted)"
        assert got.body["type"] == "success"
        assert "a hard freeze or crash that needed a restart" in got.body["message"]
        assert "Downtime: " in got.body["message"]
        assert "First kernel event: none classified" in got.body["message"]


def test_event_filters_keep_each_target_to_its_events(collector: Collector) -> None:
    with http_receiver() as kernel_only, http_receiver() as incidents_only:
        add_target(collector, f"json://127.0.0.1:{kernel_only.port}/", events=["kernel.event"])
        add_target(collector, f"json://127.0.0.1:{incidents_only.port}/", events=["incident.*"])
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01", lines=[kline(1, time.time(), XID_79)])
        lose(collector)
        deliver(collector)
        assert [r.body["title"] for r in kernel_only.accepted] == [
            "freezewatch: spark-01 kernel xid"
        ]
        assert "xid 79" in kernel_only.accepted[0].body["message"]
        assert [r.body["title"] for r in incidents_only.accepted] == [
            "freezewatch: spark-01 is silent (unreachable)"
        ]


def test_disabled_apprise_target_stays_quiet(collector: Collector) -> None:
    with http_receiver() as rec:
        add_target(collector, f"json://127.0.0.1:{rec.port}/", enabled=False)
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01", lines=[kline(1, time.time(), XID_79)])
        lose(collector)
        assert deliver(collector) == []
        assert rec.requests == [] and deliveries(collector) == []


def test_kernel_severity_floor(collector: Collector) -> None:
    add_target(collector, "json://127.0.0.1:9/", min_severity="error")
    notice = Notice(title="t", body="b")
    queued = {}
    with db.session_scope(factory(collector)) as s:
        for severity in ("warning", "error", "fatal", None, "unranked"):
            queued[severity] = outbox.enqueue(
                s,
                event="kernel.event",
                dedup_key=f"k:{severity}",
                payload={},
                text="t",
                notice=notice,
                severity=severity,
                now=utcnow(),
            )
        # The floor is for kernel events only: an incident alert always passes it.
        queued["incident"] = outbox.enqueue(
            s, event="incident.opened", dedup_key="i", payload={}, text="t", notice=notice,
            severity="info", now=utcnow(),
        )  # fmt: skip
    # Missing or unknown severities pass: a floor never silences what it cannot rank.
    assert queued == {
        "warning": 0, "error": 1, "fatal": 1, None: 1, "unranked": 1, "incident": 1,
    }  # fmt: skip
    assert highest(["warning", "fatal"]) == "fatal"
    assert highest(["warning", None]) is None
    assert not wants(["incident.*"], None, event="kernel.event", severity="fatal")


def test_test_notification_is_marked_and_never_an_alert(collector: Collector) -> None:
    with http_receiver() as rec:
        target = add_target(collector, f"json://127.0.0.1:{rec.port}/")
        r = collector.client.post(f"/api/v1/webhooks/{target['id']}/test", headers=collector.admin)
        assert r.status_code == 200 and r.json()["ok"] is True and r.json()["event"] == "test"
        [got] = rec.accepted
        assert got.body["title"].startswith("[TEST] ") and got.body["type"] == "info"
        assert "no host is down" in got.body["message"]
    assert deliveries(collector) == []  # not in the outbox: no incident lists it
    with db.session_scope(factory(collector)) as s:
        assert s.scalar(select(func.count()).select_from(Delivery)) == 0


def test_test_notification_reports_failure(collector: Collector) -> None:
    with http_receiver(statuses=[503]) as rec:
        target = add_target(collector, f"json://127.0.0.1:{rec.port}/")
        r = collector.client.post(f"/api/v1/webhooks/{target['id']}/test", headers=collector.admin)
    body = r.json()
    assert body["ok"] is False and "503" in body["error"]


def test_apprise_url_is_write_only_and_validated(collector: Collector) -> None:
    api, admin = collector.client, collector.admin
    made = add_target(collector, "json://fw:s3cret-pass@127.0.0.1:9/notify")
    assert "s3cret-pass" not in str(made) and str(made["url"]).startswith("json://fw:")
    listed = api.get("/api/v1/webhooks", headers=admin).text
    assert "s3cret-pass" not in listed
    for bad in (
        {"url": "nosuchservice://x", "format": "apprise"},
        {"url": "ntfy://topic", "format": "json"},
        {"url": "ntfy://topic", "format": "apprise", "events": ["incident.closed"]},
        {"url": "ntfy://topic", "format": "apprise", "min_severity": "loud"},
    ):
        assert api.post("/api/v1/webhooks", json=bad, headers=admin).status_code == 422, bad
    patched = api.patch(
        f"/api/v1/webhooks/{made['id']}", json={"events": ["incident.opened"]}, headers=admin
    )
    assert patched.status_code == 200 and patched.json()["events"] == ["incident.opened"]
    bad_patch = api.patch(
        f"/api/v1/webhooks/{made['id']}", json={"url": "nosuchservice://x"}, headers=admin
    )
    assert bad_patch.status_code == 400


def test_env_specs_take_apprise_urls_and_filters() -> None:
    spec = targets.parse_target_spec(
        "ntfy://fw-alerts|events=incident.*;kernel.event|min_severity=error"
    )
    assert spec == {
        "url": "ntfy://fw-alerts",
        "format": "apprise",
        "events": ["incident.*", "kernel.event"],
        "min_severity": "error",
        "secret": None,
    }
    legacy = targets.parse_target_spec("http://b/|json|whsec_abc=")
    assert (legacy["format"], legacy["secret"], legacy["events"]) == ("json", "whsec_abc=", None)
    settings = Settings(webhook_urls="tgram://123456789:AABBCCDDEEFF/12345|min_severity=fatal")
    assert targets.parse_target_spec(settings.webhook_urls)["min_severity"] == "fatal"


def test_backoff_window_gives_up_on_apprise_too(collector: Collector) -> None:
    with http_receiver(statuses=[500, 500]) as rec:
        add_target(collector, f"json://127.0.0.1:{rec.port}/")
        token = collector.add_host("spark-01")
        post(collector, token, "spark-01")
        lose(collector)
        deliver(collector)
        deliver(collector, now_offset_s=timedelta(hours=25).total_seconds())
        [row] = deliveries(collector)
        assert (row.state, row.attempts) == ("failed", 2)
        assert rec.accepted == []


def test_test_notification_to_a_signed_webhook_verifies(collector: Collector) -> None:
    with receiver() as rec:
        r = collector.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": SECRET}, headers=collector.admin
        )
        target_id = r.json()["id"]
        sent = collector.client.post(f"/api/v1/webhooks/{target_id}/test", headers=collector.admin)
        assert sent.json()["ok"] is True and sent.json()["status"] == 200
        [got] = rec.received
        assert rec.bad_signatures == 0 and got["id"] == sent.json()["msg_id"]
        assert got["body"]["type"] == "test" and got["body"]["test"] is True
    assert deliveries(collector) == []
