"""Stats and spec-decode lines from the real vLLM corpus, field by field, against what each
line says (read by hand): V0's stats line without ``Engine NNN:``, data-parallel engines,
external prefix-cache hit rates, V0's ``Speculative metrics:`` and V1's ``SpecDecoding
metrics:`` in their 0.10 and 0.2x forms."""

from __future__ import annotations

from typing import Any

import pytest

from collector.vllm.log_parser import VllmLogParser
from tests.support.real_corpus import vllm_logs


def facts_of(name: str, kind: str) -> list[dict[str, Any]]:
    [log] = [log for log in vllm_logs() if log.path.name == name]
    parser = VllmLogParser()
    return [f.data for line in log.lines for f in parser.feed(line) if f.kind == kind]


@pytest.mark.parametrize(
    ("name", "index", "want"),
    [
        (
            "v0.6-vllm-12314-v0-stats.log",
            5,
            {
                "engine": None,
                "prompt_throughput": 0.0,
                "generation_throughput": 41.7,
                "running": 1,
                "swapped": 0,
                "waiting": 0,
                "kv_cache_usage_pct": 2.3,
                "cpu_kv_cache_usage_pct": 0.0,
                "prefix_cache_hit_rate_pct": None,
            },
        ),
        (
            "v0.9-ascend-1170-dp-stats-then-crash.log",
            1,
            {
                "engine": "001",
                "prompt_throughput": 1.5,
                "generation_throughput": 10.0,
                "running": 0,
                "waiting": 0,
                "kv_cache_usage_pct": 0.0,
                "prefix_cache_hit_rate_pct": 0.0,
            },
        ),
        (
            "v0.2x-vllm-43295-mtp-stats-spec.log",
            0,
            {
                "engine": "000",
                "prompt_throughput": 4917.3,
                "generation_throughput": 929.6,
                "running": 9,
                "waiting": 56,
                "kv_cache_usage_pct": 94.2,
                "prefix_cache_hit_rate_pct": 0.0,
            },
        ),
        (
            "v0.2x-ascend-12521-dp-mtp-external-prefix.log",
            1,
            {
                "engine": "004",
                "generation_throughput": 45.0,
                "running": 1,
                "waiting": 0,
                "kv_cache_usage_pct": 10.1,
                "prefix_cache_hit_rate_pct": 0.0,
                "external_prefix_cache_hit_rate_pct": 100.0,
            },
        ),
        (
            # V0's separate prefix-cache line (0.6.3): a stats fact of its own.
            "v0.6-vllm-9539-v0-spec-metrics.log",
            0,
            {
                "engine": None,
                "prompt_throughput": None,
                "prefix_cache_hit_rate_pct": 94.35,
                "cpu_prefix_cache_hit_rate_pct": 0.0,
            },
        ),
    ],
)
def test_stats_lines(name: str, index: int, want: dict[str, Any]) -> None:
    got = facts_of(name, "stats")[index]
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(
    ("name", "index", "want"),
    [
        (
            "v0.6-vllm-9539-v0-spec-metrics.log",
            0,
            {
                "acceptance_rate_pct": 64.2,
                "accepted_tokens": 8547,
                "drafted_tokens": 13311,
                "mean_acceptance_length": None,
            },
        ),
        (
            "v0.7-vllm-7301-v0-spec-metrics-cumulative.log",
            1,
            {"acceptance_rate_pct": 6.7, "accepted_tokens": 1, "drafted_tokens": 15},
        ),
        (
            "v0.10-vllm-24127-spec-throughput.log",
            0,
            {
                "acceptance_rate_pct": 88.8,
                "mean_acceptance_length": 5.44,
                "accepted_throughput": 4.37,
                "drafted_throughput": 4.92,
                "accepted_tokens": 262,
                "drafted_tokens": 295,
                "per_position_acceptance": [0.983, 0.949, 0.915, 0.881, 0.712],
            },
        ),
        (
            "v0.2x-vllm-43295-mtp-stats-spec.log",
            1,
            {
                "acceptance_rate_pct": 78.9,
                "mean_acceptance_length": 2.58,
                "accepted_throughput": 569.05,
                "drafted_throughput": 721.21,
                "accepted_tokens": 5692,
                "drafted_tokens": 7214,
                "per_position_acceptance": [0.859, 0.719],
            },
        ),
        (
            "v0.2x-ascend-12521-dp-mtp-external-prefix.log",
            0,
            {
                "acceptance_rate_pct": 62.3,
                "mean_acceptance_length": 2.87,
                "accepted_tokens": 282,
                "drafted_tokens": 453,
                "per_position_acceptance": [0.821, 0.609, 0.437],
            },
        ),
    ],
)
def test_spec_decode_lines(name: str, index: int, want: dict[str, Any]) -> None:
    got = facts_of(name, "spec_decode")[index]
    assert {k: got[k] for k in want} == want
