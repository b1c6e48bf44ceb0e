"""One vLLM log line as a shipper, a terminal or a paste hands it over: the wrappers in front
(journald, docker, CI gutters, a markdown quote), colours, then vLLM's own header and process
tags, split from the message.

``LEVEL MM-DD HH:MM:SS [file.py:NNN] message`` after an optional ``(<Proc> pid=N) `` tag (0.5-0.7.3
print ``file.py:NNN]`` without the ``[``; a forum's editor escapes them, ``\\[file.py:NNN\\]``).
The messages themselves are ``log_formats``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Colours as the terminal gets them, and as a paste shows them in caret notation ("^[[0;36m").
ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[A-Za-z]")
# What a paste or a log reader wraps a whole line in: a markdown block quote ("> ", nested "> > ",
# or the bar "▎ " a rendered quote leaves in a copy: spark-vllm-docker#396), the RFC 3339 stamp of
# `docker logs -t` / `kubectl logs --timestamps` (bracketed in CI logs such as Buildkite's), the
# "  | " gutter a CI log page (Buildkite's) puts before each line a copy takes, docker compose's
# "service  | ", and the "2025-06-27 12:57:51,690 - name - INFO - " of a Python logger re-logging
# the server's output, and the journal's "Aug 19 18:34:30 host vllm[8707]: " (its month in the
# locale's language; after a `short-iso` stamp "host docker[3764470]: "). Peeled off the front, so
# an error keeps only vLLM's own text and a traceback's frames keep their indent. The journal's
# identifier and compose's service name the process that wrote the line (``VllmLine.source``):
# such a stream interleaves other processes' lines with the server's.
WRAPPER = re.compile(
    r"(?:[^\W\d_]{3,4}\.? [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d))"
    r" \S+ (?P<unit>[\w.@/-]+)\[\d+\]: |"
    r"[>▌▍▎▏][ \t]?|\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\]?[ \t]|"
    r"[ \t]*\|[ \t]|(?P<service>\w[\w.-]*)\s+\|(?: |$)|"
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.]+ - [A-Z]+ - "
)
HEADER = re.compile(
    r"(?:\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"(?P<date>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+"
    r"\\?\[?(?P<src>[\w./-]+:\d+)\\?\]\s?(?P<msg>.*)$"
)
# Where a paste joined records into one line, padding each with a run of spaces (a terminal
# copy, nlzy/vllm-gfx906#14): the run right before a header (its tag, level and time). Only a
# run's first space may start the match, so a long run is scanned once.
JOINED = re.compile(
    r"(?<=\S)\s{2,}(?=(?:\([\w.:-]+ pid=\d+\)\s+)?"
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d)"
)
# A tqdm bar redrawn with no newline, a record glued right after its "]" ("... 1/83 [00:00<00:43,
# 1.90it/s](Worker_TP1 pid=N) INFO ..."): two records, the bar's (a capture's, a load's) and the
# record's. The count starts a number ("(?<!\d)") and the bracket ends at the first "[" or "]",
# so each is scanned once.
GLUED_BAR = re.compile(
    r"(?<!\d)\d+/(?:\d+|\?) \[[^\[\]]*\]"
    r"(?=\([\w.:-]+ pid=\d+\)|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:)"
)
TAG_ONLY = re.compile(r"\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\)\s?(?P<msg>.*)$")
# vLLM's own process tags, whatever their fields: V1's worker "(VllmWorker rank=7 pid=N)", a
# Ray worker's "(RayWorkerWrapper pid=N, ip=...)" printed inside the engine's tag.
TAGS_BEFORE = re.compile(r"(?:\([^()]*\bpid=\d+[^()]*\)\s*)+$")
# How far back from a header its tags are looked for (real ones take under 100 characters): a
# search over the whole line retries a long text of "(...pid=N" from each "(", quadratic.
TAGS_REACH = 512


@dataclass
class VllmLine:
    level: str | None
    log_time: str | None
    msg: str
    clean: str
    # The "(EngineCore_DP0 pid=N)" tag ("" without one): engines' tracebacks interleave.
    proc: str = ""
    # The writer a shipper's wrapper names: compose's service, the journal's identifier.
    source: str = ""


def records(line: str) -> list[str]:
    """The records a line holds: one, unless a paste joined several (``JOINED``) or a progress
    bar has a record glued after it (``GLUED_BAR``). A run right after a process tag pads that
    tag from its own header (Ray's, vLLM's): no record ends there.
    """
    out, start = [], 0
    for bar in GLUED_BAR.finditer(line):
        out.extend(_joined(line[start : bar.end()]))
        start = bar.end()
    return out + _joined(line[start:])


def _joined(line: str) -> list[str]:
    """The records a paste joined into ``line``, each padded with a run of spaces."""
    out, start = [], 0
    for m in JOINED.finditer(line):
        before = ANSI.sub("", line[max(m.start() - TAGS_REACH, start) : m.start()])
        if TAGS_BEFORE.search(before) is None:
            out.append(line[start : m.start()])
            start = m.end()
    out.append(line[start:])
    return out


def split_vllm_line(line: str) -> VllmLine:
    """Strip colours, a paste's wrappers and vLLM's prefix; the message is what remains.

    ``clean`` is the line without colours and wrappers (what an error quotes), from vLLM's
    tags or header on: whatever a shipper put before them (a desktop app's or a job runner's
    stamp) is not vLLM's text. Without either, only the wrappers (``WRAPPER``, the journal's
    prefix among them) go, since nothing else says where such a prefix ends."""
    clean = ANSI.sub("", line).rstrip("\r\n").rstrip()
    end, source = 0, ""  # each wrapper matched where the last ended, the line cut once
    while m := WRAPPER.match(clean, end):
        end = m.end()
        source = m.group("unit") or m.group("service") or source
    clean = clean[end:]
    m = HEADER.search(clean)
    if m:
        proc = f"{m.group('proc')} pid={m.group('pid')}" if m.group("proc") else ""
        msg = m.group("msg")
        return VllmLine(m.group("level"), m.group("date"), msg, _from_tags(clean, m), proc, source)
    t = TAG_ONLY.search(clean)
    if t:
        proc = f"{t.group('proc')} pid={t.group('pid')}"
        return VllmLine(None, None, t.group("msg"), _from_tags(clean, t), proc, source)
    return VllmLine(None, None, clean, clean, source=source)


def _from_tags(clean: str, m: re.Match[str]) -> str:
    """The line from vLLM's header, or from the process tags right before it."""
    tags = TAGS_BEFORE.search(clean, max(m.start() - TAGS_REACH, 0), m.start())
    return clean[m.start() if tags is None else tags.start() :]
