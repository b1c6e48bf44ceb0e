"""bench/ingest.py measures what it says: its HTTP figure counts the lines the collector
answered as stored (it once divided before the writers ran and printed 0 lines/s), and its
driver figure the rows the bulk statement inserted."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bench import ingest
from bench._common import add_host, running_collector
from collector import db
from collector.models import Line


def stored_lines(db_url: str) -> int:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(select(func.count()).select_from(Line)) or 0)
    finally:
        engine.dispose()


def test_http_and_driver_figures_count_the_rows_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "DURATION_S", 60.0)  # the 2 bodies each end it first
    monkeypatch.setattr(ingest, "CLIENTS", 1)
    made = ingest.make_bodies
    monkeypatch.setattr(ingest, "make_bodies", lambda kind, c, _count: made(kind, c, 2))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        token = add_host(url, "bench")
        meter = ingest.Meter({"client": time.process_time})
        with running_collector(url) as base:
            lines_per_s = ingest.run([base], token, "lines", meter)
        over_http = stored_lines(url)
        # the meter read the posting: what it stored, over the time it took
        assert meter.count == over_http and meter.wall > 0 and set(meter.spent) == {"client"}
        assert meter.per_item_us()["client"] == 1e6 * meter.spent["client"] / over_http
        driver_per_s = ingest.driver_run(url, ingest.line_rows(url, 2))
        assert over_http == 2 * ingest.BATCH
        assert stored_lines(url) == 4 * ingest.BATCH  # the driver's host: as many again
    assert lines_per_s > 0 and driver_per_s > 0
