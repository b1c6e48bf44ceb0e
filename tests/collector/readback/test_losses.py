"""What the host view says was lost: drop-ledger reports counted once, however often stored."""

from __future__ import annotations

import time
from typing import Any

from tests.collector.conftest import Collector
from tests.collector.freeze_support import post


def report(seq: int, ts: float, lines: int, samples: int, **extra: Any) -> dict[str, Any]:
    data = {"lines": lines, "samples": samples, "events": 0, **extra}
    return {"seq": seq, "ts": ts, "kind": "spool_dropped", "data": data}


def test_losses_are_the_growth_of_each_ledger_and_say_when(collector: Collector) -> None:
    token = collector.add_host("lossy")
    t = time.time()
    window = {"first_ts": t - 40, "last_ts": t - 10, "reasons": ["disk_full"]}
    first = report(1, t, 120, 300, ledger="a1", **window)
    post(collector, token, "lossy", events=[first])
    post(collector, token, "lossy", events=[{**first, "seq": 2}])  # resent: answer was lost
    later = {"first_ts": t - 5, "last_ts": t - 1, "reasons": ["spool_full"]}
    post(collector, token, "lossy", events=[report(3, t, 150, 300, ledger="a1", **later)])
    post(collector, token, "lossy", events=[report(4, t, 7, 0)])  # an older agent's report
    losses = collector.client.get("/api/v1/hosts/lossy", headers=collector.admin).json()[
        "spool_losses"
    ]
    assert losses["total"] == {"samples": 300, "lines": 157, "events": 0}
    newest, middle, oldest = losses["reports"]
    assert (newest["lines"], middle["lines"], oldest["lines"]) == (7, 30, 120)
    assert (oldest["first_ts"], oldest["last_ts"], oldest["reasons"]) == (
        t - 40,
        t - 10,
        ["disk_full"],
    )
