"""The one shape of a stored sample and line (``SampleOut``, ``LineOut``), read from rows."""

from __future__ import annotations

from sqlalchemy import select

from collector import db
from collector.models import Line, Sample
from collector.readback.series import LINES, SAMPLES, lines_out, samples_out
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post, sample


def test_rows_read_from_loaded_values_or_by_attribute_agree(collector: Collector) -> None:
    """The fast read (the row's loaded values) and the attribute read give the same shapes,
    also for a row whose attributes were expired (it is then read by attribute)."""
    token = collector.add_host("spark-01")
    lines = [kline(1, 11, "NVRM: Xid (PCI:0000:01:00): 13, pid=7"), kline(2, 12, "usb 1-1")]
    body = batch(samples=[sample(3), sample(4, available=2**30)], lines=lines)
    assert post(collector, token, body).status_code == 200
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        line_rows = list(session.scalars(select(Line).order_by(Line.seq)))
        sample_rows = list(session.scalars(select(Sample).order_by(Sample.seq)))
        by_attribute = LINES.validate_python(line_rows, from_attributes=True)
        assert lines_out(line_rows) == by_attribute
        assert [x.text for x in by_attribute] == [line["text"] for line in lines]
        samples = SAMPLES.validate_python(sample_rows, from_attributes=True)
        assert samples_out(sample_rows) == samples
        assert [s.mem_available for s in samples] == [40 * 2**30, 2**30]

        session.expire(line_rows[0])
        session.expire(sample_rows[1], ["packed", "mem_available"])
        assert lines_out(line_rows) == by_attribute
        assert samples_out(sample_rows) == samples
