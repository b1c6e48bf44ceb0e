"""Two collector apps on one database taking turns on one host's batches (what a round-robin
proxy in front of replicas does) derive what one app derives: the vLLM startup plan, its
phases and anomalies, and each hang verdict once (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from collector import db
from collector.api import ingest as ingest_api
from collector.ingest.batch import ingest_batch
from collector.models import Host, VllmState
from collector.schemas import Batch
from collector.timeutil import from_epoch
from collector.vllm import state as vllm_state
from tests.collector.conftest import Collector, make_collector
from tests.collector.ingest.test_batch import batch, post
from tests.collector.ingest.test_derive import MTP_LOG, events, vllm, vllm_lines, vllm_sample
from tests.collector.kernel.test_restated import FALLS, TARGETS, alerts, kmsg, occurrences

HOST = "spark-01"


def second_database(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Another empty database of the same kind as ``db_url``."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'single.db'}"
    from tests.support.postgres import fresh_database

    return fresh_database(request.getfixturevalue("postgres_url"))


def batches() -> Iterator[dict[str, Any]]:
    """A vLLM start line by line, with metrics samples that stall long enough to hang, then
    move again (one resume)."""
    lines = vllm_lines(MTP_LOG, seq0=100)
    t0 = 1764400000.0
    tokens = [100.0 + 10 * min(i, 4) for i in range(25)] + [500.0] * 3
    for i, moved in enumerate(tokens):
        yield batch(lines=lines[i : i + 1], samples=[vllm_sample(i, t0 + i, 2, moved, 11.0)])


def derived(c: Collector) -> dict[str, Any]:
    status = vllm(c, HOST)
    plan = status["plan"]
    return {
        "plans": len(status["plans"]),
        "plan": {k: v for k, v in plan.items() if k not in ("id",)},
        "hang": [
            (e["kind"], e["ts"], e["data"]["since"])
            for e in events(c, HOST, kind="vllm_hung,vllm_resumed")
        ],
        "anomalies": [e["data"]["anomaly"] for e in events(c, HOST, kind="vllm_anomaly")],
        "stats": len(events(c, HOST, kind="vllm_stats")),
    }


def test_replicas_taking_turns_derive_what_one_collector_derives(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with ExitStack() as stack:
        one = stack.enter_context(_collector(second_database(db_url, tmp_path, request)))
        a = stack.enter_context(_collector(db_url))
        b = stack.enter_context(_collector(db_url))
        token = one.add_host(HOST)
        shared_token = a.add_host(HOST)
        for i, body in enumerate(batches()):
            assert post(one, token, body).status_code == 200
            assert post((a, b)[i % 2], shared_token, body).status_code == 200
        alone, turns = derived(one), derived(a)
        assert derived(b) == turns
        assert alone["plan"]["kv_cache_tokens"] == 5_747_892  # the single app got it all
        assert [kind for kind, _ts, _since in alone["hang"]] == ["vllm_resumed", "vllm_hung"]
        assert turns == alone
        with db.session_scope(a.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
            versions = session.scalars(select(VllmState.version)).all()
        assert versions == [len(list(batches()))]  # every batch continued from the last one


def without_line_ids(found: dict[str, Any]) -> dict[str, Any]:
    phases = [{k: v for k, v in p.items() if k != "line_id"} for p in found["plan"]["phases"]]
    return {**found, "plan": {**found["plan"], "phases": phases}}


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many times batches were stored (attempts, retries included) and how many read the
    state row under its lock."""
    counts = {"attempts": 0, "locked_reads": 0}
    store_once, version = ingest_api._store_once, vllm_state._VERSION

    def attempt(*args: Any) -> Any:
        counts["attempts"] += 1
        return store_once(*args)

    def locked_read(session: Any) -> Any:
        counts["locked_reads"] += 1
        return version(session)

    with monkeypatch.context() as patch:
        patch.setattr(ingest_api, "_store_once", attempt)
        patch.setattr(vllm_state, "_VERSION", locked_read)
        yield counts


def test_a_collector_alone_stops_reading_the_row_and_still_notices_another_replica(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One collector reads the host's row under its lock only until it has found it unmoved
    OPTIMISTIC_AFTER times; when another replica then takes some of the host's batches, its
    next batch is stored again from the row, once, and everything derived is what one
    collector derives."""
    bodies = list(batches())
    with ExitStack() as stack:
        one = stack.enter_context(_collector(second_database(db_url, tmp_path, request)))
        a = stack.enter_context(_collector(db_url))
        b = stack.enter_context(_collector(db_url))
        token, shared_token = one.add_host(HOST), a.add_host(HOST)
        with counting(monkeypatch) as alone:
            for body in bodies:
                assert post(one, token, body).status_code == 200
        # The first batch reads the row twice (before and after creating it), the next
        # OPTIMISTIC_AFTER once each, and the rest not at all.
        assert alone == {"attempts": len(bodies), "locked_reads": vllm_state.OPTIMISTIC_AFTER + 2}
        turns = [a] * 10 + [b] * 4 + [a] * (len(bodies) - 14)
        with counting(monkeypatch) as taken:
            for app, body in zip(turns, bodies, strict=True):
                assert post(app, shared_token, body).status_code == 200
        assert taken["attempts"] == len(bodies) + 1  # a's first batch after b's turns, again
        # The attempt rolled back took line ids from PostgreSQL's sequence: ids differ, not what
        # the lines say.
        assert without_line_ids(derived(a)) == without_line_ids(derived(one))
        assert derived(b) == derived(a)
        with db.session_scope(a.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
            versions = session.scalars(select(VllmState.version)).all()
        assert versions == [len(bodies)]


def test_replicas_taking_turns_keep_reading_the_row_and_store_each_batch_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a round-robin proxy every batch finds the row moved: a replica never skips the
    locked read, so no batch is stored twice."""
    bodies = list(batches())
    with ExitStack() as stack:
        a = stack.enter_context(_collector(db_url))
        b = stack.enter_context(_collector(db_url))
        token = a.add_host(HOST)
        with counting(monkeypatch) as counts:
            for i, body in enumerate(bodies):
                assert post((a, b)[i % 2], token, body).status_code == 200
        # Each batch reads the row once; the first twice (before and after creating it).
        assert counts == {"attempts": len(bodies), "locked_reads": len(bodies) + 1}


def test_a_batch_rolled_back_after_its_state_was_saved_leaves_no_copy_ahead_of_the_row(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A transaction that fails after the vLLM state was written (at its commit, say) takes the
    write back with it; the process's copy must go too, or a batch skipping the locked read
    would continue from a state the database never kept."""
    bodies = list(batches())
    with ExitStack() as stack:
        one = stack.enter_context(_collector(second_database(db_url, tmp_path, request)))
        c = stack.enter_context(_collector(db_url))
        token, alone_token = c.add_host(HOST), one.add_host(HOST)
        for body in bodies:
            assert post(one, alone_token, body).status_code == 200
        for body in bodies[:8]:
            assert post(c, token, body).status_code == 200
        app = c.client.app.state  # type: ignore[attr-defined]
        with db.session_scope(app.sessionmaker) as session:
            host_id = session.scalar(select(Host.id).where(Host.name == HOST))
        assert host_id is not None
        ahead = app.vllm_states.host(host_id)
        assert ahead.quiet_syncs >= vllm_state.OPTIMISTIC_AFTER  # skipping the locked read now
        with pytest.raises(RuntimeError), db.session_scope(app.sessionmaker) as session:
            ingest_batch(
                session,
                host_id=host_id,
                batch=Batch.model_validate(bodies[8]),
                received_at=1764400100.0,
                now=from_epoch(1764400100.0),
                settings=c.settings,
                vllm_states=app.vllm_states,
            )
            raise RuntimeError("the commit failed")
        assert app.vllm_states.host(host_id) is not ahead
        for body in bodies[8:]:
            assert post(c, token, body).status_code == 200
        assert without_line_ids(derived(c)) == without_line_ids(derived(one))


_collector = contextmanager(make_collector)


def test_a_batch_stored_again_after_another_replica_alerts_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch that finds the row moved carries a kernel fault (gpud's real Xid 79 line): the
    attempt rolled back takes its event, occurrence and queued webhooks with it, so the fault
    is stored and alerted once."""
    bodies = list(batches())
    (xid, _fall), gpu = FALLS["gpud"]
    with ExitStack() as stack:
        a = stack.enter_context(_collector(db_url, webhook_urls=TARGETS, kernel_alert_cooldown_s=0))
        b = stack.enter_context(_collector(db_url, webhook_urls=TARGETS, kernel_alert_cooldown_s=0))
        token = a.add_host(HOST)
        for body in bodies[:8]:
            assert post(a, token, body).status_code == 200
        assert post(b, token, bodies[8]).status_code == 200
        faulty = {**bodies[9], "lines": [*bodies[9]["lines"], kmsg(5000, *xid)]}
        with counting(monkeypatch) as counts:
            assert post(a, token, faulty).status_code == 200
        assert counts["attempts"] == 2  # found the row moved: stored again
        assert alerts(a, HOST) == [("xid", "79", gpu, "fatal", True)]
        assert occurrences(a, HOST) == [("xid", "79", gpu, 1, "fatal")]


def test_a_deleted_host_leaves_no_vllm_state_behind_and_one_made_again_starts_fresh(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Deleting a host drops the process's copy of its parser and detectors; the host made
    again under its name (on SQLite under the same id) derives what a new host derives."""
    bodies = list(batches())
    with ExitStack() as stack:
        one = stack.enter_context(_collector(second_database(db_url, tmp_path, request)))
        c = stack.enter_context(_collector(db_url))
        states = c.client.app.state.vllm_states  # type: ignore[attr-defined]
        token = c.add_host(HOST)
        for body in bodies[:8]:
            assert post(c, token, body).status_code == 200
        gone = host_id(c)
        old = states.host(gone)
        assert old.version == 8 and old.stream is not None and old.detectors
        assert c.client.delete(f"/api/v1/hosts/{HOST}", headers=c.admin).status_code == 204
        assert states.host(gone) is not old
        token, alone_token = c.add_host(HOST), one.add_host(HOST)
        if db_url.startswith("sqlite"):
            assert host_id(c) == gone  # the id handed out again
        fresh = states.host(host_id(c))
        assert (fresh.version, fresh.stream, fresh.detectors) == (-1, None, {})
        for body in bodies:
            assert post(c, token, body).status_code == 200
            assert post(one, alone_token, body).status_code == 200
        assert without_line_ids(derived(c)) == without_line_ids(derived(one))


def host_id(c: Collector) -> int:
    with db.session_scope(c.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        return session.scalars(select(Host.id).where(Host.name == HOST)).one()
