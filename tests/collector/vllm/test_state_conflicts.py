"""When a host's vLLM state row is contended: a batch that finds it moved twice is answered a
503 with nothing stored (SQLite and PostgreSQL), and on PostgreSQL a batch that skipped the
locked read never waits for the row while another replica holds it (no deadlock)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from collector.ingest import derive
from collector.models import (
    Host,
    HostEvent,
    KernelEventRow,
    Line,
    Sample,
    VllmStart,
    VllmState,
)
from collector.vllm.state import StaleState
from tests.collector.conftest import Collector
from tests.collector.freeze_support import factory
from tests.collector.ingest.test_batch import post
from tests.collector.kernel.test_restated import FALLS, kmsg
from tests.collector.vllm.test_shared_state import HOST, batches


def stored(c: Collector) -> dict[str, Any]:
    """What the database holds of the host: rows per table, its state row's version, whether a
    heartbeat was recorded."""
    with factory(c)() as s:
        host = s.scalars(select(Host).where(Host.name == HOST)).one()
        counts = {
            model.__tablename__: s.scalar(
                select(func.count()).select_from(model).where(model.host_id == host.id)
            )
            for model in (Sample, Line, HostEvent, KernelEventRow, VllmStart)
        }
        version = s.scalar(select(VllmState.version).where(VllmState.host_id == host.id))
        return {**counts, "version": version, "seen": host.last_seen_at is not None}


def test_a_batch_finding_the_state_moved_twice_is_a_503_and_stored_once_when_sent_again(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second attempt reads the row under its lock, so it cannot find it moved; should it
    anyway (a row deleted and made again, a bug), the agent gets a 503 to retry, not a 500."""
    token = collector.add_host(HOST)
    (xid, _fall), _gpu = FALLS["gpud"]
    first = next(batches())
    body = {**first, "lines": [*first["lines"], kmsg(5000, *xid)]}
    save, failures = derive.save_shared, [1, 2]

    def moved_twice(*args: Any, **kwargs: Any) -> None:
        if failures:
            raise StaleState(f"forced ({failures.pop()})")
        save(*args, **kwargs)

    monkeypatch.setattr(derive, "save_shared", moved_twice)
    nothing = stored(collector)
    refused = post(collector, token, body)
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == "1"
    assert "nothing was stored" in refused.json()["detail"]
    assert not failures  # both attempts ran, both rolled back
    assert (
        stored(collector)
        == nothing
        == {
            "samples": 0,
            "lines": 0,
            "host_events": 0,
            "kernel_events": 0,
            "vllm_starts": 0,
            "version": None,
            "seen": False,
        }
    )
    again = post(collector, token, body)
    assert again.status_code == 200, again.text
    assert again.json()["stored"] == {"samples": 1, "lines": 2, "events": 0}
    once = stored(collector)
    assert once == {**once, "samples": 1, "lines": 2, "kernel_events": 1, "vllm_starts": 1}
    assert once["version"] == 1 and once["seen"]
    replay = post(collector, token, body)
    assert replay.json()["duplicates"] == {"samples": 1, "lines": 2, "events": 0}
    assert {**stored(collector), "version": 1} == once  # (a replay saves the state again)
