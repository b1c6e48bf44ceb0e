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
from collector.models import VllmState
from tests.collector.conftest import Collector, make_collector
from tests.collector.ingest.test_batch import batch, post
from tests.collector.ingest.test_derive import MTP_LOG, events, vllm, vllm_lines, vllm_sample

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


_collector = contextmanager(make_collector)
