"""The real-log corpus under ``tests/fixtures/real/`` (see its README): loading and scoring.

Kernel files: ``# key: value`` header lines, then one line per log line, ``<label> <verbatim
line>``. A label is ``kind[:code][@module]`` (an event this line must raise), ``.`` (no event
may be raised here: benign chatter or the inside of a report already counted) or ``~`` (part of
a fault report that may or may not count as its own event).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


@dataclass(frozen=True)
class Expect:
    kind: str | None  # None: no event; "~": either
    code: str | None = None
    module: str | None = None


@dataclass
class CorpusFile:
    path: Path
    header: dict[str, str]
    labels: list[Expect]
    lines: list[str]


def parse_label(label: str) -> Expect:
    if label == ".":
        return Expect(None)
    if label == "~":
        return Expect("~")
    label, _, module = label.partition("@")
    kind, _, code = label.partition(":")
    return Expect(kind, code or None, module or None)


def load(path: Path) -> CorpusFile:
    header: dict[str, str] = {}
    labels, lines = [], []
    for raw in path.read_text(encoding="utf-8").split("\n"):
        if not raw:
            continue
        if raw.startswith("# ") and not lines:
            key, _, value = raw[2:].partition(": ")
            header[key] = value
            continue
        label, _, line = raw.partition(" ")
        labels.append(parse_label(label))
        lines.append(line)
    return CorpusFile(path, header, labels, lines)


def kernel_files() -> list[CorpusFile]:
    return [load(p) for p in sorted((REAL / "kernel").glob("*.txt"))]


@dataclass
class Score:
    expected: int = 0
    found: int = 0
    benign: int = 0
    misses: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0


def matches(expect: Expect, kind: str | None, code: str | None, module: str | None) -> bool:
    return (
        kind == expect.kind
        and (expect.code is None or code == expect.code)
        and (expect.module is None or module == expect.module)
    )


def score_lines(files: list[CorpusFile], classify: Callable[[str], object]) -> Score:
    """Each line on its own, as ingest sees it (modules are attributed later, not scored)."""
    score = Score()
    for f in files:
        for n, (expect, line) in enumerate(zip(f.labels, f.lines, strict=True), start=1):
            event = classify(line)
            where = f"{f.path.name}:{n}: {line[:160]}"
            kind = getattr(event, "kind", None)
            code = getattr(event, "code", None)
            if expect.kind is None:
                score.benign += 1
                if event is not None:
                    score.false_alarms.append(f"{where} -> {kind}:{code}")
            elif expect.kind != "~":
                score.expected += 1
                if matches(Expect(expect.kind, expect.code), kind, code, None):
                    score.found += 1
                else:
                    score.misses.append(f"{where} -> {kind}:{code} (want {expect})")
    return score


def score_records(files: list[CorpusFile], read: Callable[[list[str]], list]) -> Score:
    """Whole files through the record reader (inspect, pstore): modules are scored too. An
    event stands for its whole record (a line and its indented continuations)."""
    score = Score()
    for f in files:
        claimed: set[int] = set()
        for e in read(f.lines):
            span = range(e.line_no, e.line_no + len(e.text.split("\n")))
            wanted = [n for n in span if f.labels[n - 1].kind not in (None, "~")]
            hit = next(
                (
                    n
                    for n in wanted
                    if matches(f.labels[n - 1], e.event.kind, e.event.code, e.event.module)
                ),
                None,
            )
            if hit is not None:
                claimed.add(hit)
            elif not wanted and all(f.labels[n - 1].kind is None for n in span):
                line = f.lines[e.line_no - 1][:160]
                score.false_alarms.append(
                    f"{f.path.name}:{e.line_no}: {line} -> {e.event.kind}:{e.event.code}"
                )
        for n, expect in enumerate(f.labels, start=1):
            if expect.kind is None:
                score.benign += 1
            elif expect.kind != "~":
                score.expected += 1
                if n in claimed:
                    score.found += 1
                else:
                    score.misses.append(
                        f"{f.path.name}:{n}: {f.lines[n - 1][:160]} (want {expect})"
                    )
    return score


@dataclass
class VllmLog:
    path: Path
    header: dict[str, str]
    expect: dict[str, Any]
    lines: list[str]


def vllm_logs() -> list[VllmLog]:
    """``vllm/*.log``: ``# source:``, ``# what:``, ``# expect: {json}`` lines, then the log."""
    out = []
    for path in sorted((REAL / "vllm").glob("*.log")):
        header: dict[str, str] = {}
        lines = path.read_text(encoding="utf-8").split("\n")
        while lines and lines[0].startswith("# "):
            key, _, value = lines.pop(0)[2:].partition(": ")
            header[key] = value
        if lines and lines[-1] == "":
            lines.pop()
        out.append(VllmLog(path, header, json.loads(header["expect"]), lines))
    return out


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, float) and isinstance(got, (int, float)):
        return abs(want - got) < 1e-6
    return bool(want == got)


def score_plans(logs: list[VllmLog], parse: Callable[[list[str]], tuple[list, list[str]]]) -> Score:
    """Every expected plan field (and the count of starts, and the hang signals) is one point.

    ``parse`` returns the starts and the names of the hang signals, in order."""
    score = Score()
    for log in logs:
        plans, signals = parse(log.lines)
        want_signals = log.expect.get("hang_signals", [])
        score.expected += 1
        if signals == want_signals:
            score.found += 1
        else:
            score.misses.append(f"{log.path.name}: hang signals {signals}, want {want_signals}")
        expected = log.expect.get("plans", [])
        score.expected += 1
        if len(plans) == len(expected):
            score.found += 1
        else:
            score.misses.append(f"{log.path.name}: {len(plans)} starts, want {len(expected)}")
        for i, want in enumerate(expected):
            got = plans[i] if i < len(plans) else None
            for name, value in want.items():
                score.expected += 1
                if name == "error_contains":
                    actual = getattr(got, "error", None)
                    ok = actual is not None and value in actual
                else:
                    actual = getattr(got, name, None)
                    ok = got is not None and _same(value, actual)
                if ok:
                    score.found += 1
                else:
                    score.misses.append(
                        f"{log.path.name}: start {i + 1} {name}={actual!r}, want {value!r}"
                    )
    return score
