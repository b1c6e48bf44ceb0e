"""A small parser for the Prometheus text exposition format (0.0.4), enough for vLLM's /metrics.

Also reads what the formats around it allow: OpenMetrics (``# EOF``, exemplars after ``#``),
leading blanks before a sample, and the quoted UTF-8 name form ``{"name",label="v"} 1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

Sample = tuple[str, dict[str, str], float]

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "Inf": math.inf, "-Inf": -math.inf}


def _float(token: str) -> float:
    if token in _SPECIAL:
        return _SPECIAL[token]
    return float(token)


def _quoted(line: str, pos: int) -> tuple[str, int]:
    """The string that starts at ``line[pos] == '"'``, unescaped, and the index after it."""
    pos += 1
    value: list[str] = []
    while line[pos] != '"':
        if line[pos] == "\\":
            escaped = line[pos + 1]
            value.append(_ESCAPES.get(escaped, "\\" + escaped))
            pos += 2
        else:
            value.append(line[pos])
            pos += 1
    return "".join(value), pos + 1


def _labels(line: str, pos: int) -> tuple[dict[str, str], int, str]:
    """Parse ``{a="b",c="d"}`` starting at ``line[pos] == "{"``; return the labels, the end and
    the metric name when the set carries it quoted (``{"vllm:x",a="b"}``, else "")."""
    labels: dict[str, str] = {}
    quoted_name = ""
    pos += 1
    while True:
        while pos < len(line) and line[pos] in " ,":
            pos += 1
        if pos >= len(line):
            raise ValueError("unterminated label set")
        if line[pos] == "}":
            return labels, pos + 1, quoted_name
        if line[pos] == '"':  # a quoted name: the metric's own, or a label's before its "="
            text, pos = _quoted(line, pos)
            while pos < len(line) and line[pos] == " ":
                pos += 1
            if line[pos] != "=":
                quoted_name = text
                continue
            name = text
        else:
            eq = line.index("=", pos)
            name = line[pos:eq].strip()
            pos = eq
        pos += 1
        while line[pos] == " ":
            pos += 1
        if line[pos] != '"':
            raise ValueError(f"label {name} value is not quoted")
        labels[name], pos = _quoted(line, pos)


def parse_line(line: str) -> Sample | None:
    """One sample line → ``(name, labels, value)``; comments and blanks → None."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    brace = line.find("{")
    space = line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        labels, end, quoted_name = _labels(line, brace)
        name = quoted_name or line[:brace]
        rest = line[end:].split()
    else:
        name, *rest = line.split()
        labels = {}
    if not rest:
        raise ValueError(f"no value: {line!r}")
    return name.strip(), labels, _float(rest[0])  # rest[1], if any, is a timestamp


def parse(text: str) -> Iterator[Sample]:
    """Every sample in an exposition; a malformed line is skipped, never fatal."""
    for line in text.splitlines():
        try:
            sample = parse_line(line)
        except (ValueError, IndexError):
            continue
        if sample is not None:
            yield sample


def totals(text: str, names: set[str], peaks: frozenset[str] = frozenset()) -> dict[str, float]:
    """Sum each wanted metric over all its label sets (NaN samples are ignored); the metrics in
    ``peaks`` take their largest value instead (a ratio per engine must not be summed).

    Lines are pre-filtered by prefix so a large exposition (histograms) costs little; the filter
    sees past leading blanks and a quoted name's ``{"``, as the format allows both.
    """
    prefixes = tuple(names) + tuple('{"' + name for name in names)
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(prefixes):
            if not line.startswith((" ", "\t")):
                continue  # most lines: the second prefix check is for indented ones only
            line = line.lstrip(" \t")
            if not line.startswith(prefixes):
                continue
        try:
            sample = parse_line(line)
        except (ValueError, IndexError):
            continue
        if sample is None:
            continue
        name, _labels, value = sample
        if name in names and not math.isnan(value):
            if name in peaks:
                out[name] = max(out.get(name, value), value)
            else:
                out[name] = out.get(name, 0.0) + value
    return out
