"""stored_copies: a journal record finds the row another channel stored for it, by the kernel
usec and text, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from collector import db
from collector.ingest import journal_copies as kernel_copies
from collector.ingest.journal_copies import StoredCopy, kernel_usec, stored_copies
from collector.models import Line
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post


def live(seq: int, usec: int, text: str) -> dict[str, Any]:
    return {**kline(seq, seq, text), "fields": {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec)}}


def test_kernel_usec_of_every_channel() -> None:
    assert kernel_usec({"_SOURCE_MONOTONIC_TIMESTAMP": "1234"}) == 1234  # kmsg, journald
    assert kernel_usec({"usec": 1234, "msgid": 7}) == 1234  # netconsole
    assert kernel_usec({"_SOURCE_MONOTONIC_TIMESTAMP": "n/a"}) is None
    assert kernel_usec(None) is None


def test_equal_records_pair_in_kernel_order_within_the_clock_window(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    # Two records printed in the same microsecond with the same text, and older ones.
    lines = [live(s, 1000 + s, "older") for s in range(1, 5)]
    lines += [live(5, 2000, "Xid 79"), live(6, 2000, "Xid 79"), live(7, 3000, "after")]
    assert post(collector, token, batch(lines=lines)).json()["stored"]["lines"] == 7
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        rows = list(session.scalars(select(Line)))
        ids, host, boot = {ln.seq: ln.id for ln in rows}, rows[0].host_id, rows[0].boot_pk

        def find(records: list[tuple[int, str]], at: float) -> list[StoredCopy | None]:
            return stored_copies(
                session, host_id=host, boot_pk=boot, records=records, since=at, until=at + 1
            )

        # The rows are stamped 1764400001..7; the journal's clock is two minutes ahead.
        records = [(2000, "Xid 79"), (2000, "Xid 79"), (2000, "Xid 79"), (1003, "older")]
        found = find(records, 1764400000.0 + 120)
        assert found == [StoredCopy(ids[5], 1), StoredCopy(ids[6], 1), None, StoredCopy(ids[3], 1)]
        assert find([(1003, "other text")], 1764400000.0) == [None]
        far = 1764400000.0 + kernel_copies.CLOCK_SKEW_S + 60
        assert find([(1003, "older")], far) == [None]
