"""The vLLM log parser scored on real logs from vLLM 0.5 to today, copied from public bug
reports (``tests/fixtures/real/vllm``, each naming its source and what it must yield): the
number of starts, each expected plan field, the outcome and its error, and the hang signals."""

from __future__ import annotations

import re

from collector.vllm.log_parser import VllmLogParser
from tests.support.real_corpus import score_plans, vllm_logs

MIN_SCORE = 0.98


def parse(lines: list[str]) -> tuple[list, list[str]]:
    parser = VllmLogParser()
    signals = [
        fact.data["signal"]
        for line in lines
        for fact in parser.feed(line)
        if fact.kind == "hang_signal"
    ]
    return parser.plans(), signals


def test_the_corpus_is_real_and_spans_versions() -> None:
    logs = vllm_logs()
    assert len(logs) >= 20
    assert all(log.header.get("source", "").startswith("https://") for log in logs)
    versions = {m.group(1) for log in logs if (m := re.match(r"v0\.(\d+x?)", log.path.name))}
    assert {"5", "6", "7", "8", "9", "10", "11", "12", "15", "23", "2x"} <= versions  # 2x: 0.20 on
    outcomes = {p.get("outcome") for log in logs for p in log.expect.get("plans", [])}
    assert {"started", "failed", "crashed", "incomplete"} <= outcomes
    assert any(log.expect.get("hang_signals") for log in logs)


def test_every_expected_field_outcome_and_hang_signal() -> None:
    score = score_plans(vllm_logs(), parse)
    assert score.recall >= MIN_SCORE, "\n".join(score.misses)


def test_tensor_parallel_ranks_plan_with_the_smallest_rank() -> None:
    [log] = [log for log in vllm_logs() if "27313" in log.path.name]
    [plan] = parse(log.lines)[0]
    assert plan.kv_cache_gib == 11.17 and plan.kv_cache_tokens == 162704
