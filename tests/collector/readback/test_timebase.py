"""One time base for charts and filters: a host whose clock is 2 h behind still shows its last
hour as the last hour, on SQLite and PostgreSQL; a host with a good clock is left as it is."""

from __future__ import annotations

import time

import pytest

from tests.collector.conftest import Collector
from tests.collector.freeze_support import kline, post, sample

SKEW = -7200.0  # the agent's clock runs 2 h behind the collector's


def get(c: Collector, path: str, **params: object) -> dict:  # type: ignore[type-arg]
    r = c.client.get(path, params=params, headers=c.admin)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_skewed_agent_clock_is_corrected_in_charts_filters_and_the_host_view(
    collector: Collector,
) -> None:
    token = collector.add_host("skewed")
    now = time.time()
    agent_now = now + SKEW
    samples = [sample(i, agent_now - 60 + i) for i in range(1, 61)]
    lines = [kline(1, agent_now - 5, "NVRM: Xid (PCI:000f:01:00): 13, pid=1, name=x, Graphics")]
    post(collector, token, "skewed", samples=samples, lines=lines, sent_at=agent_now)
    # The measured offset includes the POST's own way to the store (1.4 s once, in a full
    # test run at load average 12), and every corrected time with it.
    slack = 1.0 + (time.time() - now)
    host = get(collector, "/api/v1/hosts/skewed")
    assert host["clock_offset_s"] == pytest.approx(-SKEW, abs=slack)
    assert host["clock_corrected"] is True

    timeline = get(collector, "/api/v1/hosts/skewed/timeline")  # the last hour, collector time
    assert timeline["clock_offset_s"] == pytest.approx(-SKEW, abs=slack)
    assert len(timeline["series"]["t"]) > 0
    assert all(now - 120 <= t <= now + slack for t in timeline["series"]["t"])
    assert [m["ts"] for m in timeline["markers"]] == [pytest.approx(now - 5, abs=slack)]

    recent = get(collector, "/api/v1/hosts/skewed/samples", since=now - 600)
    assert len(recent["samples"]) == 60
    first = recent["samples"][0]
    assert first["ts"] == pytest.approx(now - 59, abs=slack)
    assert first["agent_ts"] == pytest.approx(agent_now - 59, abs=0.01)
    stepped = get(collector, "/api/v1/hosts/skewed/samples", since=now - 600, step=10)
    assert stepped["t"] and all(t >= now - 600 for t in stepped["t"])
    found = get(collector, "/api/v1/hosts/skewed/lines", since=now - 600)["lines"]
    assert [ln["ts"] for ln in found] == [pytest.approx(now - 5, abs=slack)]
    events = get(collector, "/api/v1/hosts/skewed/events", since=now - 600)["events"]
    assert [e["ts"] for e in events] == [pytest.approx(now - 5, abs=slack)]


def test_a_good_clock_is_shown_as_the_agent_read_it(collector: Collector) -> None:
    token = collector.add_host("synced")
    now = time.time()
    post(collector, token, "synced", samples=[sample(1, now - 1)], sent_at=now - 0.3)
    host = get(collector, "/api/v1/hosts/synced")
    assert abs(host["clock_offset_s"]) < 2 and host["clock_corrected"] is False
    (row,) = get(collector, "/api/v1/hosts/synced/samples", since=now - 600)["samples"]
    assert row["ts"] == row["agent_ts"] == pytest.approx(now - 1)


def test_a_batch_held_up_in_a_network_cut_does_not_move_the_time_base(
    collector: Collector,
) -> None:
    """A POST in flight when the link went down arrives seconds late (its ``sent_at`` from
    before the cut): it once set the offset to that delay, shifting the host's records and
    reading the return of a network cut on the wrong clock. The next batch on time keeps it."""
    token = collector.add_host("cut")
    now = time.time()
    post(collector, token, "cut", samples=[sample(1, now - 1)], sent_at=now - 0.02)
    post(collector, token, "cut", samples=[sample(2, now - 0.5)], sent_at=now - 8.0)
    host = get(collector, "/api/v1/hosts/cut")
    assert abs(host["clock_offset_s"]) < 2 and host["clock_corrected"] is False
    (row,) = get(collector, "/api/v1/hosts/cut/samples", since=now - 0.75)["samples"]
    assert row["ts"] == row["agent_ts"] == pytest.approx(now - 0.5)
    post(collector, token, "cut", samples=[sample(3, now)], sent_at=time.time() - 0.02)
    assert abs(get(collector, "/api/v1/hosts/cut")["clock_offset_s"]) < 0.5
