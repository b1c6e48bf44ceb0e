"""A saved kernel log (dmesg, journalctl text or ``-o json``, raw kmsg, pstore files) as records
and the events in them, each counted once.

A record is a line plus its indented continuation lines (kmsg dictionary lines, a journal
message's later lines, dmesg's indented multi-line messages). An oops or lockup report spans
many records: its die or lockup line is the event, and the ``RIP:``/``pc :`` line (else the
first stack frame naming a module) that follows attributes it to a module, so a trace through
``[nvidia_uvm]`` is one event in ``nvidia_uvm``, not one per frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from agent.kernel.classify import classify_kernel_line
from agent.kernel.event import KernelEvent
from agent.kernel.generic import frame_module, oops_site
from agent.kernel.prefix import kernel_message, opens_record
from collector.kernel.reports import LogEvent, Reports
from collector.models import KernelAction, Severity
from collector.schemas import OutModel

ATTRIBUTED_KINDS = frozenset({"oops", "soft_lockup"})
# A fatal hardware error (GHES) is no code's fault: the RIP after it is wherever the CPU idled.
UNATTRIBUTED_CODES = frozenset({"hardware"})
# How far after its die or lockup line a report's RIP/pc line may come.
REPORT_RECORDS = 60
_END = ("---[ end trace", "---[ end Kernel panic")
# syslogd's wall broadcast heads each kernel line it relays with this line of its own, then
# prints the message indented (" kernel:[  592.97] watchdog: BUG: ..."): the heading is no part
# of the message, so the indented lines are records of their own, found on their own lines.
_WALL_HEADING = "Message from syslogd@"


class LogEventOut(OutModel):
    """An event of a saved kernel log as ``inspect --json`` and the post-mortem artifacts carry
    it: the classifier's fields, then the line its record starts on and the record's text."""

    kind: str
    code: str | None
    device: str | None
    xid: int | None
    pci: str | None
    pid: int | None
    process: str | None
    module: str | None
    meaning: str | None
    severity: Severity
    action: KernelAction
    line_no: int
    text: str


# The fields read off the classified event (the rest say where it is in the log).
EVENT_FIELDS = tuple(name for name in LogEventOut.model_fields if name not in ("line_no", "text"))


def _json_message(line: str) -> str | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "MESSAGE" not in obj:
        return None  # another tool's JSON log, no journal entry: read the line as text
    msg = obj["MESSAGE"]
    if isinstance(msg, list):  # journald exports non-UTF-8 / non-printable values as bytes
        try:
            return bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    return msg if isinstance(msg, str) else ""


def kernel_records(lines: Sequence[str]) -> Iterator[tuple[int, str]]:
    """(1-based line where the record starts, message text) for each record in a kernel log."""
    start: int | None = None
    parts: list[str] = []
    margin = 0  # the record's first line's indentation: a continuation is indented deeper
    relayed = False  # the indented lines under a wall heading: each is a record
    for index, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        indent = len(line) - len(line.lstrip(" \t"))
        deeper = indent > margin and not opens_record(line)  # not a paste under its last line
        if deeper and start is not None and not relayed and not frame_module(line):
            parts.append(line.strip())
            continue
        if start is not None:
            yield start, "\n".join(parts)
        start, parts, margin = None, [], indent
        indented = indent > 0
        if line.lstrip("\a").startswith(_WALL_HEADING):  # a raw capture rings the bell first
            relayed = True
            continue
        relayed = relayed and indented
        if not line.strip():
            continue
        if line.startswith("{"):
            msg = _json_message(line)
            if msg is not None:
                yield index, msg
                continue
        start, parts = index, [kernel_message(line)]
    if start is not None:
        yield start, "\n".join(parts)


def _attribute(event: KernelEvent, records: Sequence[tuple[int, str]]) -> KernelEvent:
    """The oops or lockup with the module (and function) of the report that follows it."""
    module = function = None
    for _line_no, text in records[:REPORT_RECORDS]:
        site = oops_site(text)
        if site is not None:
            function, module = site[0], site[1] or module
            break
        module = module or frame_module(text)
        if text.startswith(_END):
            break
    if module is None and function is None:
        return event
    where = f" in [{module}]" if module else ""
    where += f" at {function}" if function else ""
    return replace(event, module=module, meaning=f"{event.meaning}{where}")


def _record_events(line_no: int, text: str) -> list[tuple[int, str, KernelEvent]]:
    """The record's event, classified over all its lines (a message continued on the next
    line); a heading followed by indented lines that each announce an event is several."""
    parts = text.split("\n")
    if len(parts) > 1 and classify_kernel_line(parts[0]) is None:
        own = [(line_no + i, part, classify_kernel_line(part)) for i, part in enumerate(parts)]
        found = [(n, part, event) for n, part, event in own if event is not None]
        if len(found) > 1:
            return found
    event = classify_kernel_line(text.replace("\n", " "))
    return [] if event is None else [(line_no, text, event)]


def read_kernel_log(lines: Sequence[str]) -> list[LogEvent]:
    """Every event of a saved kernel log, in order, each report counted once (``reports``:
    only lines of one report are joined)."""
    records = list(kernel_records(lines))
    reports = Reports(lines)
    for i, (line_no, text) in enumerate(records):
        for n, found_text, event in _record_events(line_no, text):
            if event.kind in ATTRIBUTED_KINDS and event.code not in UNATTRIBUTED_CODES:
                event = _attribute(event, records[i + 1 :])
            reports.add(i, LogEvent(n, found_text, event))
    return reports.events


def log_event_dicts(lines: Sequence[str]) -> list[dict[str, Any]]:
    """``read_kernel_log`` as ``LogEventOut`` data (stored with an artifact, printed by
    ``inspect --json``)."""
    return [
        {
            **{name: getattr(found.event, name) for name in EVENT_FIELDS},
            "line_no": found.line_no,
            "text": found.text,
        }
        for found in read_kernel_log(lines)
    ]
