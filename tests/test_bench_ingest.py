"""bench/ingest.py measures what it says: its HTTP figure counts the lines the collector
answered as stored (it once divided before the writers ran and printed 0 lines/s), its driver
figure the rows the bulk statement inserted, the two sides taking turns."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bench import ingest
from bench._common import add_host, running_collector
from collector import db
from collector.models import Host, Line


def stored_lines(db_url: str, host: str) -> int:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            query = select(func.count()).select_from(Line).join(Host, Host.id == Line.host_id)
            query = query.where(Host.name == host)
            return int(conn.scalar(query) or 0)
    finally:
        engine.dispose()


def test_http_and_driver_figures_count_the_rows_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "CLIENTS", 1)
    monkeypatch.setattr(ingest, "ROUNDS", 2)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        token = add_host(url, "bench")
        meter = ingest.Meter({"client": time.process_time})
        driver_meter = ingest.Meter({"writers": time.process_time})
        with (
            running_collector(url) as base,
            ingest.Posting([base], token, "lines", batches=3) as posting,
            ingest.Driver(url, ingest.line_rows(url, 3)) as driver,
        ):
            ingest.in_turns(posting.writers, driver.writers, meter, driver_meter)
        # Both sides took all their batches, in two turns each; the HTTP figure is what the
        # collector answered as stored, over the time the posting took.
        over_http = stored_lines(url, "bench")
        assert over_http == posting.writers.stored == 3 * ingest.BATCH
        assert stored_lines(url, "bench-driver") == driver.writers.stored == 3 * ingest.BATCH
        assert posting.writers.next == driver.writers.next == [3]
        assert posting.writers.rate == over_http / posting.writers.seconds
        # the meter read the two HTTP turns only: what they stored, over the time they took
        assert meter.count == over_http and set(meter.spent) == {"client"}
        assert meter.wall >= posting.writers.seconds > 0  # the meter wraps each HTTP turn
        assert meter.per_item_us()["client"] == 1e6 * meter.spent["client"] / over_http
        # the driver's meter read the two driver turns only: the rows they inserted
        assert driver_meter.count == driver.writers.stored
        assert driver_meter.wall >= driver.writers.seconds > 0
