"""When a host's vLLM state row is contended: a batch that finds it moved twice is answered a
503 with nothing stored (SQLite and PostgreSQL), and on PostgreSQL a batch that skipped the
locked read never waits for the row while another replica holds it (no deadlock)."""

from __future__ import annotations

import threading
from contextlib import ExitStack, contextmanager
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
from collector.vllm import state as vllm_state
from collector.vllm.state import StaleState
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory
from tests.collector.ingest.test_batch import post
from tests.collector.kernel.test_restated import FALLS, kmsg, occurrences
from tests.collector.vllm.test_shared_state import HOST, batches, counting

_collector = contextmanager(make_collector)


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


def test_a_batch_that_skipped_the_locked_read_never_waits_for_the_row_another_replica_holds(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica ``a`` skips the locked read (it found the row where it left it) and writes what
    its batch implies (a kernel fault's occurrence) before it writes the row; replica ``b``
    locks the row first, then writes the same occurrence. Were ``a`` to wait for the row, each
    would wait for the other: PostgreSQL's deadlock detector would fail one batch with a 500.
    ``a`` takes the row held as moved instead: its batch is rolled back and stored again, from
    the row, once ``b`` is done. (The two batches' samples fall in different minutes: two
    batches of one minute queue on its rollup row before either gets this far.)"""
    from tests.support.postgres import drop_database, fresh_database

    url = fresh_database(postgres_url)
    (xid, _fall), _gpu = FALLS["gpud"]
    bodies = list(batches())
    optimistic, locked = bodies[8], bodies[9]
    optimistic = {**optimistic, "lines": [*optimistic["lines"], kmsg(5000, *xid)]}
    later = [{**s, "ts": s["ts"] + 120} for s in locked["samples"]]
    locked = {**locked, "samples": later, "lines": [*locked["lines"], kmsg(5001, *xid)]}
    try:
        with ExitStack() as stack:
            a = stack.enter_context(_collector(url))
            b = stack.enter_context(_collector(url))
            token = a.add_host(HOST)
            for body in bodies[:8]:
                assert post(a, token, body).status_code == 200
            with factory(a)() as s:
                host_id = s.scalars(select(Host.id).where(Host.name == HOST)).one()
            a_state = a.client.app.state.vllm_states.host(host_id)  # type: ignore[attr-defined]
            b_state = b.client.app.state.vllm_states.host(host_id)  # type: ignore[attr-defined]
            assert a_state.quiet_syncs >= vllm_state.OPTIMISTIC_AFTER  # a skips the read
            b_holds, a_wrote = threading.Event(), threading.Event()
            sync, save = derive.sync_shared, derive.save_shared

            def b_holds_the_row(session: Any, *, host_id: int, state: Any) -> Any:
                row = sync(session, host_id=host_id, state=state)
                if state is b_state and not b_holds.is_set():
                    b_holds.set()
                    assert a_wrote.wait(60), "a never got to writing the row"
                return row

            def a_writes_the_row(session: Any, row: Any, state: Any, **moved: bool) -> None:
                if state is a_state:
                    a_wrote.set()  # its occurrence is written, b goes on to write it too
                save(session, row, state, **moved)

            monkeypatch.setattr(derive, "sync_shared", b_holds_the_row)
            monkeypatch.setattr(derive, "save_shared", a_writes_the_row)
            answers: dict[str, Any] = {}

            def send(name: str, c: Collector, body: dict[str, Any]) -> None:
                try:
                    answers[name] = post(c, token, body).status_code
                except Exception as exc:  # the app's own error (a 500), raised by TestClient
                    answers[name] = repr(exc)

            threads = [
                threading.Thread(target=send, args=("b", b, locked)),
                threading.Thread(target=send, args=("a", a, optimistic)),
            ]
            with counting(monkeypatch) as counts:
                threads[0].start()
                assert b_holds.wait(60)
                threads[1].start()
                for thread in threads:
                    thread.join(120)
            assert answers == {"a": 200, "b": 200}
            assert counts["attempts"] == 3  # a's batch found the row held: stored again
            monkeypatch.undo()
            assert occurrences(a, HOST) == [("xid", "79", _gpu, 2, "fatal")]
            with factory(a)() as s:
                assert s.scalar(select(VllmState.version)) == 10
    finally:
        drop_database(url)
