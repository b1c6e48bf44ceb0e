"""Stats and spec-decode lines from the real vLLM corpus, field by field, against what each
line says (read by hand): V0's stats line without ``Engine NNN:``, data-parallel engines,
external prefix-cache hit rates, V0's ``Speculative metrics:`` and V1's ``SpecDecoding
metrics:`` in their 0.10 and 0.2x forms; V0 0.4 to 0.9 and V1 0.12 to 0.23 stats lines behind
docker timestamps, pasted with trailing blanks, wrapped by a terminal, with "Deferred" requests
and a one-position MTP acceptance."""

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
        (
            # The reported hang: one running, fourteen waiting, for an hour.
            "v0.1x-llmscaler-391-stuck-running-waiting-stats.log",
            0,
            {
                "engine": "000",
                "prompt_throughput": 0.0,
                "generation_throughput": 5.4,
                "running": 1,
                "waiting": 14,
                "kv_cache_usage_pct": 76.5,
                "prefix_cache_hit_rate_pct": 92.0,
            },
        ),
        (
            "v0.6-vllm-11871-v0-stats-with-metrics-scrapes.log",
            2,
            {
                "engine": None,
                "generation_throughput": 18.4,
                "running": 1,
                "swapped": 0,
                "waiting": 0,
                "kv_cache_usage_pct": 20.0,
                "cpu_kv_cache_usage_pct": 0.0,
            },
        ),
        (
            # V0 0.4: no trailing period after the CPU usage.
            "v0.4-vllm-6737-v0-pending-full-kv-stats.log",
            4,
            {
                "engine": None,
                "generation_throughput": 2103.3,
                "running": 219,
                "waiting": 768,
                "kv_cache_usage_pct": 100.0,
                "cpu_kv_cache_usage_pct": 0.0,
            },
        ),
        (
            "v0.12-vllm-30599-stats-thinking-until-cap.log",
            1,
            {
                "engine": "000",
                "prompt_throughput": 0.0,
                "generation_throughput": 181.0,
                "running": 1,
                "waiting": 0,
                "kv_cache_usage_pct": 0.6,
                "prefix_cache_hit_rate_pct": 68.2,
            },
        ),
        (
            "v0.1x-vllm-37307-stats-long-prompts-queue.log",
            4,
            {
                "prompt_throughput": 24000.7,
                "running": 34,
                "waiting": 66,
                "kv_cache_usage_pct": 65.4,
            },
        ),
        (
            # An RFC 3339 timestamp from `docker logs --timestamps` before the process prefix.
            "v0.2x-tenstorrent-3359-docker-timestamped-stats.log",
            1,
            {
                "engine": "000",
                "generation_throughput": 7.2,
                "running": 9,
                "waiting": 1,
                "kv_cache_usage_pct": 68.8,
            },
        ),
        (
            "v0.23-ascend-11876-dp-deferred-spec-one-position.log",
            1,
            {
                "engine": "001",
                "running": 0,
                "waiting": 1,
                "deferred": 1,
                "kv_cache_usage_pct": 0.5,
                "external_prefix_cache_hit_rate_pct": 100.0,
            },
        ),
        (
            "v0.8-vllm-18674-v0-cpu-prefix-hit-line.log",
            1,
            {
                "engine": None,
                "running": None,
                "prefix_cache_hit_rate_pct": 0.0,
                "cpu_prefix_cache_hit_rate_pct": 90.0,
            },
        ),
        (
            # Pasted with two trailing blanks.
            "v0.2x-spyre-1030-prefix-hit-climbing.log",
            0,
            {"prompt_throughput": 1546.5, "running": 1, "prefix_cache_hit_rate_pct": 0.0},
        ),
        (
            # Wrapped at 132 columns inside "reqs": the running count is still read (the rest
            # of the line, waiting and KV usage, is on the next line).
            "v0.8-tenstorrent-246-v0-stats-wrapped-at-132.log",
            0,
            {"prompt_throughput": 0.0, "generation_throughput": 616.1, "running": 32},
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
        (
            # MTP with one speculative token: a single per-position rate.
            "v0.23-ascend-11876-dp-deferred-spec-one-position.log",
            0,
            {
                "acceptance_rate_pct": 91.8,
                "mean_acceptance_length": 1.92,
                "accepted_throughput": 16.7,
                "drafted_throughput": 18.2,
                "accepted_tokens": 167,
                "drafted_tokens": 182,
                "per_position_acceptance": [0.918],
            },
        ),
        (
            "v0.23-ascend-11876-dp-deferred-spec-one-position.log",
            1,
            {
                "acceptance_rate_pct": 90.3,
                "accepted_tokens": 28,
                "per_position_acceptance": [0.903],
            },
        ),
    ],
)
def test_spec_decode_lines(name: str, index: int, want: dict[str, Any]) -> None:
    got = facts_of(name, "spec_decode")[index]
    assert {k: got[k] for k in want} == want
