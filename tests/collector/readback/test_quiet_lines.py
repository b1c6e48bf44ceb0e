"""Quiet log pages: vLLM access-log and canary lines left out, and counted."""

from __future__ import annotations

from typing import Any

from tests.collector.conftest import Collector
from tests.collector.freeze_support import post

T0 = 1764400000.0
LINES = "/api/v1/hosts/spark-01/lines"
ACCESS = 'INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK'
POST_OK = 'vllm[3141]: INFO: 10.0.0.7 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
HEALTH_503 = 'INFO:     127.0.0.1:51299 - "GET /health HTTP/1.1" 503 Service Unavailable'
POST_500 = 'INFO:     127.0.0.1:51300 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error'


def line(seq: int, source: str, text: str, priority: int = 6) -> dict[str, Any]:
    return {"seq": seq, "ts": T0 + seq, "source": source, "priority": priority, "text": text}


def test_quiet_leaves_out_access_log_and_canaries_and_counts_them(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    body = [
        line(1, "vllm", "INFO 05-01 10:00:00 [loader.py:1] Loading weights took 20.1 seconds"),
        *[line(2 + i, "vllm", ACCESS) for i in range(5)],
        line(7, "journal", POST_OK),
        {**line(8, "kmsg", "freezewatch canary 12 1764400008.000000", 3), "kseq": 8},
        line(9, "vllm", POST_500),
        {**line(10, "kmsg", "NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus.", 3),
         "kseq": 10},
        line(11, "vllm", HEALTH_503),
    ]  # fmt: skip
    post(collector, token, "spark-01", lines=body)

    everything = collector.read(LINES)
    assert len(everything["lines"]) == 11 and "quieted" not in everything
    quiet = collector.read(LINES, quiet="true", order="desc")
    # A 5xx answer is not noise, unless it is a polled endpoint's (a loading server's /health).
    assert [x["seq"] for x in quiet["lines"]] == [10, 9, 1]
    assert quiet["quieted"] == 8

    # A page of one: the count covers the stretch between it and the next page.
    first = collector.read(LINES, quiet="true", order="desc", limit=1)
    assert [x["seq"] for x in first["lines"]] == [10] and first["quieted"] == 1
    second = collector.read(LINES, quiet="true", order="desc", limit=1, cursor=first["next_cursor"])
    assert [x["seq"] for x in second["lines"]] == [9] and second["quieted"] == 0
    third = collector.read(LINES, quiet="true", order="desc", limit=1, cursor=second["next_cursor"])
    assert [x["seq"] for x in third["lines"]] == [1] and third["quieted"] == 7
    assert third["next_cursor"] is None
