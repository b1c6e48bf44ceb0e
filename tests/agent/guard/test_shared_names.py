"""The guard and the collector speak of the same things: kernel event kinds and vLLM phases
from ``agent.wire``, and the agent's small matchers give the collector's verdicts.

The corpus is every kernel line the collector's classifier tests use (read from that test
module's string literals, so new lines there are checked here too), the kernel fixtures and
the vLLM fixture logs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent.guard.kernel import match_record, matches
from agent.guard.phase import PhaseTracker
from agent.kernel.classify import EVENT_KINDS, classify_kernel_line
from agent.kernel.xid_catalog import xid_catalog
from agent.sources.kmsg import parse_record, split_records
from agent.sources.lines import level_priority
from agent.wire import KERNEL_EVENT_KINDS, VLLM_PHASES
from collector.vllm.log_parser import PHASES, parse_vllm_log
from tests.agent.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[3]


def kernel_corpus() -> list[str]:
    source = (ROOT / "tests/agent/kernel/test_classify.py").read_text()
    texts = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 20
    ]
    texts += (FIXTURES / "kernel/bare.txt").read_text().splitlines()
    records, _ = split_records((FIXTURES / "kmsg-dump.txt").read_bytes())
    texts += [r["text"] for r in map(parse_record, records) if r is not None]
    return sorted(set(texts))


def test_the_names_are_the_wire_constants() -> None:
    assert tuple(EVENT_KINDS) == KERNEL_EVENT_KINDS
    assert tuple(PHASES) == VLLM_PHASES


def test_xid_fatal_follows_the_catalog() -> None:
    fatal = {code for code, info in xid_catalog().items() if info.fatal}
    assert {79, 119, 120, 48, 95} <= fatal
    assert not {13, 31, 43, 94} & fatal  # the catalog says restart the app / ignore
    for code in (79, 13):
        event = match_record({"source": "journal", "fields": {"origin": "nvml", "xid": code}})
        assert event is not None and matches("xid", "fatal", event) is (code in fatal)


def test_the_guard_sees_what_the_collector_sees() -> None:
    """One classifier for both: kernel records get its verdict, other lines none."""
    for text in kernel_corpus():
        for source in ("kmsg", "netconsole"):
            assert match_record({"source": source, "text": text}) == classify_kernel_line(text)
        assert match_record({"source": "vllm", "text": text}) is None


@pytest.mark.parametrize("log", sorted((FIXTURES / "vllm").glob("*.log")), ids=lambda p: p.name)
def test_the_agent_follows_vllm_through_the_collectors_phases(log: Path) -> None:
    lines = log.read_text().splitlines()
    tracker, seen = PhaseTracker(), []
    for text in lines:
        tracker.observe_line({"source": "vllm", "text": text, "priority": level_priority(text)})
        if tracker.phase is not None and (not seen or seen[-1] != tracker.phase):
            seen.append(tracker.phase)
    expected: list[str] = []
    for plan in parse_vllm_log(lines):
        for entry in plan.phases:
            if not expected or expected[-1] != entry["phase"]:
                expected.append(entry["phase"])
    assert seen == expected and seen
