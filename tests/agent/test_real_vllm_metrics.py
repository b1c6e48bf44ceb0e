"""The agent's reading of real vLLM /metrics pastes (tests/fixtures/real/vllm-metrics/).

Each file is a verbatim excerpt with ``# source:``, ``# what:`` and ``# expect:`` header lines;
the whole file goes to the parser, headers included, since a ``#`` line is a comment to
Prometheus. ``expect`` is what a human reads in the dump: ``null`` where the dump has no sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.sources.vllm_http import METRICS, metrics_from_text

CORPUS = Path(__file__).parents[1] / "fixtures" / "real" / "vllm-metrics"
FILES = sorted(CORPUS.glob("*.txt"))


def header(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines before the first line that is not one."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.removeprefix("# ").partition(": ")
        if not line.startswith("# ") or not sep or key not in ("source", "what", "expect"):
            break
        out[key] = value
    return out


def test_the_corpus_spans_v0_to_the_engine_label() -> None:
    assert len(FILES) >= 4
    text = "".join(path.read_text() for path in FILES)
    for marker in ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", 'engine="0"'):
        assert marker in text


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_file_names_its_source_and_what_it_is(path: Path) -> None:
    head = header(path)
    assert head["source"].startswith("https://github.com/")
    assert head["what"] and set(json.loads(head["expect"])) == set(METRICS)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_agent_reads_what_a_human_reads(path: Path) -> None:
    expected = json.loads(header(path)["expect"])
    fields = metrics_from_text(path.read_text(encoding="utf-8"))
    assert fields == expected
    for key in ("running", "waiting", "preemptions", "prompt_tokens", "generation_tokens"):
        assert fields[key] is None or type(fields[key]) is int  # counts stay whole numbers


def test_the_headers_alone_yield_nothing() -> None:
    # "# source: https://..." or "# what: vllm:kv_cache_usage_perc ..." is never a sample.
    heads = "".join(
        "\n".join(line for line in path.read_text().splitlines()[:3]) + "\n" for path in FILES
    )
    assert set(metrics_from_text(heads).values()) == {None}
