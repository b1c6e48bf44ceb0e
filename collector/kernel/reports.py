"""A saved log's events with each multi-line report counted once, and only lines of the same
report joined: an NVSwitch SXid's verdict and its dump, an Xid 79 and the driver's own "GPU has
fallen off the bus." line after it, an arm64 SError line and the panic after it.

The NVSwitch driver prints an SXid's verdict ("22013, Non-fatal, Link 44 ...") and then its
error entry's dump ("22013, Severity 0 Engine instance 44 ...", "22013, Data {...}"), sometimes
two entries per verdict; switches that report at once interleave their lines. A dump joins the
report of its own switch and SXid whose verdict came last, while it is near (``SXID_GAP``
records since that report's previous line) and, for a Severity line, of its link. A dump before
any such verdict is a report whose verdict the capture cut off: its own occurrence, as bad as
its Severity line says (the driver's own verdict), else as its switch's next verdict of the
same SXid says if that follows near it.

The driver's "GPU <address>: GPU has fallen off the bus." comes right after the Xid 79 it
restates (the corpus: the next record, 4-9 us later; NVIDIA's ``osinit.c`` logs one right after
the other). A fall line further than ``FALL_RECORDS`` records from an Xid 79 of its GPU, or
whose kernel time is not within ``FALL_SECONDS`` after the Xid's (another boot), is another fall.

arm64's "SError Interrupt on CPU<n>, code ..." line is followed, after the CPU's registers, by
"Kernel panic - not syncing: Asynchronous SError Interrupt" (``arm64_serror_panic``; the corpus:
17-22 records and 67-168 us later). The first such panic within ``SERROR_RECORDS`` records and
``SERROR_SECONDS`` after an SError line restates it; one further away, in another boot, or with
no SError line before it (lost, or cut off) is a panic of its own.

An oops's head line ("BUG: kernel NULL pointer dereference, ...", "kernel BUG at ...!", arm64's
"Unable to handle kernel ...": ``agent.kernel.oops_head``) is its event; the die line after it
("Oops: 0000 [#1] ...": the corpus, 3-12 records and under 60 ms later) restates it when it
comes within ``OOPS_HEAD_RECORDS`` records and ``OOPS_HEAD_SECONDS``, one die line per head, the
oldest head still open first: CPUs that hit ``BUG()`` at once print their head lines before
``die()`` serializes their die lines (head, head, die, die). A die line with no head line
before it (a report that prints none, a general protection fault, a head the capture lost) is
the event. A die line printed twice, the same words at the same kernel time within
``OOPS_HEAD_RECORDS`` records (syslogd's wall broadcast of it, then the log's own copy), is one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent.kernel.event import KernelEvent
from agent.kernel.generic import SERROR_NEEDLE, restates_serror
from agent.kernel.nvidia import sxid_verdict
from agent.kernel.oops_head import NEEDLES as HEAD_NEEDLES
from agent.kernel.oops_head import is_die_line, opens_oops_report

# Records from one line of an SXid report to the next: switches reporting at once put their
# lines between (three in gpud's README: four records, with its quote's blank '>' lines); an
# HGX board has four to twelve switches.
SXID_GAP = 16
# Records and seconds from an Xid 79 to the driver's fall line restating it.
FALL_RECORDS = 3
FALL_SECONDS = 1.0
# Records and seconds from an SError line to its panic: the registers are 11-16 records
# (2 or 3 per line), with the CPU, Tainted, Hardware name, Workqueue, pstate, pc, lr, sp and pmr
# lines and another CPU's lines between; a slow serial console spreads them over a second.
SERROR_RECORDS = 32
SERROR_SECONDS = 2.0
# Records and seconds from an oops's head line to its die line: x86's #PF decoding and page
# table line (3-5 records), arm64's abort decoding (7-15), another CPU's or the console's
# lines between; a slow serial console spreads them over a second.
OOPS_HEAD_RECORDS = 24
OOPS_HEAD_SECONDS = 2.0
SXID_DUMP = ("Severity ", "Data {")
_LINK = re.compile(r"\bLink (\d{1,4})\b")
_INSTANCE = re.compile(r"^Severity \d{1,3} Engine instance (\d{1,4})\b")
# The time a line's prefix gives: the kernel's monotonic "[  65.315783]", else a clock.
_MONOTONIC = re.compile(r"\[\s{0,16}(\d{1,12}(?:\.\d{1,9})?)\]")
_CLOCK = re.compile(r"(?<!\d)(\d\d):(\d\d):(\d\d)(?!\d)")
_DAY = 86400.0


@dataclass(frozen=True)
class LogEvent:
    """One event of a saved log: where its record starts, the record's text, the event."""

    line_no: int
    text: str
    event: KernelEvent


@dataclass
class _Report:
    """An SXid report being read: its event's place, the record of its latest line, its link."""

    index: int
    record: int
    link: int | None
    verdict: bool  # says how bad it is: its verdict line, or a dump's Severity line


@dataclass
class _Lead:
    """A report's first line whose restatement may follow (an Xid 79's fall line, an SError
    line's panic): its record and its line's time."""

    record: int
    stamp: tuple[str, float] | None
    restated: bool = False


def _number(pattern: re.Pattern[str], text: str | None) -> int | None:
    m = pattern.search(text or "")
    return int(m.group(1)) if m else None


def _stamp(line: str, tag: str) -> tuple[str, float] | None:
    """The kernel's monotonic time in the line's prefix (before ``tag``), else its clock."""
    head = line[: line.find(tag)][:256] if tag in line else ""
    m = _MONOTONIC.search(head)
    if m:
        return "monotonic", float(m.group(1))
    c = _CLOCK.search(head)
    if c:
        return "clock", int(c.group(1)) * 3600.0 + int(c.group(2)) * 60 + int(c.group(3))
    return None


def _soon_after(
    first: tuple[str, float] | None, then: tuple[str, float] | None, seconds: float
) -> bool:
    """``then`` is at most ``seconds`` after ``first`` (or neither line says when)."""
    if first is None or then is None:
        return first is then
    if first[0] != then[0]:
        return False
    delta = then[1] - first[1]
    if first[0] == "clock":
        delta %= _DAY  # a report across midnight
    return 0 <= delta <= seconds


Stamp = tuple[str, float]


class Reports:
    """The events of one saved log as they are read (``add``), each report counted once.
    ``stamps``: each line's time where the caller knows it (a record's kernel time), instead of
    the time its prefix says."""

    def __init__(self, lines: Sequence[str], stamps: Sequence[Stamp | None] | None = None) -> None:
        self.events: list[LogEvent] = []
        self._lines = lines
        self._stamps = stamps
        self._xid79: dict[str | None, _Lead] = {}
        self._serror: _Lead | None = None
        self._heads: list[_Lead] = []  # oops head lines whose die line has not come yet
        self._dies: dict[tuple[str, Stamp], int] = {}  # a die line's words and time: its record
        self._sxid: dict[tuple[str | None, str | None], _Report] = {}

    def add(self, record: int, found: LogEvent) -> None:
        """``found``, of the ``record``-th record, unless it restates a report already counted."""
        event = found.event
        if event.kind == "sxid":
            if self._sxid_joins(record, event):
                return
        elif event.kind == "bus_off" and self._restates_xid79(record, found):
            return
        elif event.kind == "xid" and event.code == "79":
            self._xid79[event.device] = _Lead(record, self._stamp_of(found.line_no, "NVRM"))
        elif event.kind == "oops" and event.code == "serror":
            self._serror = _Lead(record, self._stamp_of(found.line_no, SERROR_NEEDLE))
        elif restates_serror(event) and self._restates(
            self._serror, record, found, "Kernel panic", SERROR_RECORDS, SERROR_SECONDS
        ):
            return
        elif opens_oops_report(event.kind, event.code, event.detail):
            line = self._lines[found.line_no - 1]
            tag = next((t for t in HEAD_NEEDLES if t in line), "\n")
            self._heads = [h for h in self._heads if record - h.record <= OOPS_HEAD_RECORDS]
            self._heads.append(_Lead(record, self._stamp_of(found.line_no, tag)))
        elif is_die_line(event.kind, event.code, event.detail) and (
            self._repeats_die(record, found) or self._restates_head(record, found)
        ):
            return
        self.events.append(found)

    def _stamp_of(self, line_no: int, tag: str) -> Stamp | None:
        if self._stamps is not None:
            return self._stamps[line_no - 1]
        return _stamp(self._lines[line_no - 1], tag)

    def _sxid_joins(self, record: int, event: KernelEvent) -> bool:
        key = (event.pci, event.code)
        report = self._sxid.get(key)
        near = report is not None and record - report.record <= SXID_GAP
        said = sxid_verdict(event.detail)
        if not (event.detail or "").startswith(SXID_DUMP):  # a verdict: a new report
            if report is not None and near and not report.verdict and said is not None:
                self._give_verdict(report.index, event, said)
            self._sxid[key] = _Report(len(self.events), record, _number(_LINK, event.detail), True)
            return False
        instance = _number(_INSTANCE, event.detail)
        if report is not None and near and instance in (None, report.link):
            report.record = record
            return True
        if report is not None and near and report.link is None:  # a verdict naming no link
            report.record, report.link = record, instance
            return True
        self._sxid[key] = _Report(len(self.events), record, instance, said is not None)
        return False

    def _give_verdict(self, index: int, verdict: KernelEvent, said: str) -> None:
        """The dump at ``index``, whose verdict was cut off, as bad as ``verdict`` (the same
        switch's next report of the same SXid) says."""
        found = self.events[index]
        dump = replace(
            found.event,
            severity=verdict.severity,
            action=verdict.action,
            meaning=f"{found.event.meaning} ({said})",
        )
        self.events[index] = replace(found, event=dump)

    def _restates_xid79(self, record: int, found: LogEvent) -> bool:
        """The fall line restates its GPU's Xid 79 just before it (one fall line per Xid)."""
        xid = self._xid79.get(found.event.device)
        if xid is None or xid.restated or record - xid.record > FALL_RECORDS:
            return False
        if not _soon_after(xid.stamp, self._stamp_of(found.line_no, "NVRM"), FALL_SECONDS):
            return False
        xid.restated = True
        return True

    def _repeats_die(self, record: int, found: LogEvent) -> bool:
        """The die line is a copy of one just before it: its words at the same kernel time."""
        stamp = self._stamp_of(found.line_no, "[#")
        if stamp is None:
            return False
        key = (found.event.detail or "", stamp)
        seen = self._dies.get(key)
        self._dies[key] = record
        return seen is not None and record - seen <= OOPS_HEAD_RECORDS

    def _restates_head(self, record: int, found: LogEvent) -> bool:
        """The die line restates the oldest head line still open near it (one die per head)."""
        for head in self._heads:
            if self._restates(
                head, record, found, "[#", OOPS_HEAD_RECORDS, OOPS_HEAD_SECONDS, strict_time=False
            ):
                self._heads.remove(head)
                return True
        return False

    def _restates(
        self,
        lead: _Lead | None,
        record: int,
        found: LogEvent,
        tag: str,
        records: int,
        seconds: float,
        strict_time: bool = True,
    ) -> bool:
        """The line restates the report ``lead`` opened just before it (an SError line's
        panic, an oops head's die line): within ``records`` and ``seconds``, once per lead.
        ``strict_time``: a line that says its time and one that does not are two reports
        (else only two times too far apart are)."""
        if lead is None or lead.restated or record - lead.record > records:
            return False
        then = self._stamp_of(found.line_no, tag)
        timed = lead.stamp is not None and then is not None
        if (strict_time or timed) and not _soon_after(lead.stamp, then, seconds):
            return False
        lead.restated = True
        return True
