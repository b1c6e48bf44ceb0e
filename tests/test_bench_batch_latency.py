"""bench/batch_latency.py posts to both checkouts in turn and reports what it measured."""

from __future__ import annotations

import json
import sys

import pytest

from bench import batch_latency
from bench._common import ROOT


def test_both_checkouts_are_posted_to_and_compared(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    posted: dict[str, int] = {}
    post = batch_latency.Side.post

    def counting(side: batch_latency.Side, *, record: bool = True) -> None:
        post(side, record=record)
        if record:
            posted[side.token] = posted.get(side.token, 0) + 1

    monkeypatch.setattr(batch_latency.Side, "post", counting)
    monkeypatch.setattr(batch_latency, "WARMUP", 1)
    argv = ["batch_latency.py", "--db", "sqlite", "--rounds", "2", "--per-round", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--vs", str(ROOT)])
    assert batch_latency.main() == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sqlite"]
    assert sorted(posted.values()) == [4, 4]  # two rounds of two batches, each side
    assert figures["median_ms"] > 0 and figures["baseline_median_ms"] > 0
    assert figures["ratio"] == round(figures["median_ms"] / figures["baseline_median_ms"], 3)
