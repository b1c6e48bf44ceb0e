"""Ingest is total on SQLite and PostgreSQL: NUL, out-of-range and non-finite values are either
stored (a line's NUL escaped and flagged; a number parsed out of kernel text that no column
holds left out of it) or refused whole with a 422 that names the field. Every line here is a
synthetic test input, not a real log line."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from collector import db
from collector.models import KernelEventRow, Line
from collector.schemas import escape_nul, unescape_nul
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post, sample

NUL_LINE = "INFO 05-01 12:00:00 engine.py:42] prompt: 'a\x00b' \\x00 C:\\temp"  # test input


def vllm_line(seq: int, text: str) -> dict[str, Any]:
    return {"seq": seq, "ts": 1764400000.0 + seq, "source": "vllm", "text": text}


def stored_lines(c: Collector) -> list[Line]:
    with db.session_scope(c.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        return list(session.scalars(select(Line).order_by(Line.id)))


def test_nul_in_a_line_is_stored_escaped_and_flagged(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    resp = post(collector, token, batch(lines=[vllm_line(1, NUL_LINE), vllm_line(2, "plain")]))
    assert resp.status_code == 200, resp.text
    nul, plain = stored_lines(collector)
    assert nul.escaped and "\x00" not in nul.text
    assert unescape_nul(nul.text) == NUL_LINE  # lossless
    assert not plain.escaped and plain.text == "plain"
    listed = collector.client.get("/api/v1/hosts/spark-01/lines", headers=collector.admin)
    assert [line["escaped"] for line in listed.json()["lines"]] == [True, False]


def test_escape_round_trips_backslashes_and_nul() -> None:
    for text in ["", "\x00", "\\", "\\x00", "\\\x00\\\\x00", "a\x00\x00b\\"]:
        assert "\x00" not in escape_nul(text)
        assert unescape_nul(escape_nul(text)) == text


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"boot_id": "b\x00"}, ["boot_id"]),
        ({"agent": {"version": "0.1\x00", "pid": 1}}, ["agent", "version"]),
        ({"agent": {"version": "0.1", "pid": 2**31}}, ["agent", "pid"]),
        ({"samples": [{**sample(1), "seq": 2**63}]}, ["samples", 0, "seq"]),
        ({"samples": [{**sample(1), "mem": {"MemTotal": 2**63}}]}, ["samples", 0, "mem"]),
        ({"samples": [{**sample(1), "gpu": {"util": 10**30}}]}, ["samples", 0, "gpu"]),
        ({"lines": [{**kline(1, 2**63)}]}, ["lines", 0, "kseq"]),
        ({"lines": [{**kline(1, 1), "fields": {"K": "v\x00"}}]}, ["lines", 0, "fields"]),
        ({"events": [{"seq": 1, "ts": 1.0, "kind": "source_error", "data": {"e": "\x00"}}]},
         ["events", 0, "data"]),
    ],
)  # fmt: skip
def test_a_value_no_column_holds_is_a_422_naming_the_field(
    collector: Collector, change: dict[str, Any], loc: list[Any]
) -> None:
    token = collector.add_host("spark-01")
    resp = post(collector, token, {**batch(lines=[kline(9, 9)]), **change})
    assert resp.status_code == 422, resp.text
    assert any(e["loc"][: len(loc)] == loc for e in resp.json()["errors"]), resp.text
    assert stored_lines(collector) == []  # rejected whole


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("where", ["psi", "load", "gpu", "ts"])
def test_non_finite_numbers_are_a_422(collector: Collector, number: str, where: str) -> None:
    token = collector.add_host("spark-01")
    part = {
        "psi": '"psi": {"memory": {"some": {"avg10": %s}}}',
        "load": '"load": {"1": %s}',
        "gpu": '"gpu": {"util": %s}',
        "ts": '"ts": %s',
    }[where] % number
    seq = "" if where == "ts" else '"ts": 1764400000.0, '
    raw = (
        '{"host": "spark-01", "boot_id": "b1", "agent": {"version": "0.1"}, '
        f'"samples": [{{"seq": 1, {seq}{part}}}]}}'
    ).encode()
    resp = post(collector, token, raw)
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"][0]["loc"][:2] == ["samples", 0]


def test_kernel_numbers_too_big_for_a_column_stay_in_the_text(collector: Collector) -> None:
    """An Xid code and pid of 25 digits (test input): the event is stored, the numbers that no
    32-bit column holds are left out of their columns and kept in the line and ``code``."""
    token = collector.add_host("spark-01")
    big = "9" * 25
    text = f"NVRM: Xid (PCI:0000:01:00): {big}, pid={big}, name=python3, Ch 00000008"
    resp = post(collector, token, batch(lines=[kline(1, 1, text)]))
    assert resp.status_code == 200, resp.text
    with db.session_scope(collector.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        events = list(session.scalars(select(KernelEventRow)))
    assert [(e.kind, e.xid, e.pid) for e in events] == [("xid", None, None)]
    assert big in (events[0].code or "") and stored_lines(collector)[0].text == text


def test_a_far_off_sample_is_stored_but_never_the_latest(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    now = collector.client.app.state.clock()  # type: ignore[attr-defined]
    samples = [
        {**sample(1), "ts": now},
        {**sample(2, available=1), "ts": 4102444800.0},  # 2100
        {**sample(3, available=2), "ts": 1.0},  # 1970
    ]
    assert post(collector, token, batch(samples=samples)).status_code == 200
    host = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert host["latest_sample"]["seq"] == 1
    listed = collector.client.get(
        "/api/v1/hosts/spark-01/samples?since=0&until=5000000000", headers=collector.admin
    ).json()["samples"]
    assert sorted(s["seq"] for s in listed) == [1, 2, 3]
