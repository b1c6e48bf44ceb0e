"""The live path holds a quiet-while-starting signal seen before any start across batches
(the parser's snapshot in the host's shared state keeps it, as another app reads it) and
stores it, once released, with its own line and time; a dropped one stores nothing."""

from __future__ import annotations

from sqlalchemy import select

from collector import db
from collector.models import Line
from collector.vllm.state import VllmStates
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, post
from tests.collector.ingest.test_derive import events
from tests.collector.vllm.test_held_signals import ARGS, CACHE_DIR, COMPILING, SHM


def _send(c: Collector, host: str, texts: list[str], t0: float) -> None:
    token = c.add_host(host)
    for i, text in enumerate(texts):  # one line a batch, each read by a fresh app's state:
        c.client.app.state.vllm_states = VllmStates()  # type: ignore[attr-defined]
        line = {"seq": 10 + i, "ts": t0 + 60 * i, "source": "vllm", "text": text}
        assert post(c, token, batch(host, lines=[line])).status_code == 200


def _line_id(c: Collector, text: str) -> int:
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        return session.scalars(select(Line.id).where(Line.text == text)).one()


def test_a_released_signal_is_stored_with_its_own_line_and_time(collector: Collector) -> None:
    t0 = 1764400000.0
    _send(collector, "spark-01", [SHM, CACHE_DIR, ARGS, COMPILING], t0)
    [signal] = events(collector, "spark-01", kind="vllm_hang_signal")
    assert signal["data"]["signal"] == "shm_broadcast_timeout"
    assert signal["data"]["line_id"] == _line_id(collector, SHM)
    assert signal["data"]["phase"] is None and signal["data"]["start_id"] is None
    assert abs(signal["ts"] - t0) < 1e-3


def test_a_dropped_signal_stores_nothing(collector: Collector) -> None:
    _send(collector, "spark-02", [SHM, CACHE_DIR, COMPILING], 1764400000.0)
    assert events(collector, "spark-02", kind="vllm_hang_signal") == []
