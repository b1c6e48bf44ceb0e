"""A saved log's events with each multi-line report counted once, and only lines of the same
report joined: an NVSwitch SXid's verdict and its dump, an Xid 79 and the driver's own "GPU has
fallen off the bus." line after it.

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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent.kernel.event import KernelEvent
from agent.kernel.nvidia import sxid_verdict

# Records from one line of an SXid report to the next: switches reporting at once put their
# lines between (three in gpud's README: four records, with its quote's blank '>' lines); an
# HGX board has four to twelve switches.
SXID_GAP = 16
# Records and seconds from an Xid 79 to the driver's fall line restating it.
FALL_RECORDS = 3
FALL_SECONDS = 1.0
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
class _Xid79:
    """An Xid 79 whose GPU's fall line may follow: its record and its line's time."""

    record: int
    stamp: tuple[str, float] | None
    restated: bool = False


def _number(pattern: re.Pattern[str], text: str | None) -> int | None:
    m = pattern.search(text or "")
    return int(m.group(1)) if m else None


def _stamp(line: str) -> tuple[str, float] | None:
    """The kernel's monotonic time in the line's prefix (before ``NVRM``), else its clock."""
    head = line[: line.find("NVRM")][:256] if "NVRM" in line else ""
    m = _MONOTONIC.search(head)
    if m:
        return "monotonic", float(m.group(1))
    c = _CLOCK.search(head)
    if c:
        return "clock", int(c.group(1)) * 3600.0 + int(c.group(2)) * 60 + int(c.group(3))
    return None


def _soon_after(first: tuple[str, float] | None, then: tuple[str, float] | None) -> bool:
    """``then`` is at most ``FALL_SECONDS`` after ``first`` (or neither line says when)."""
    if first is None or then is None:
        return first is then
    if first[0] != then[0]:
        return False
    delta = then[1] - first[1]
    if first[0] == "clock":
        delta %= _DAY  # a report across midnight
    return 0 <= delta <= FALL_SECONDS


Stamp = tuple[str, float]


class Reports:
    """The events of one saved log as they are read (``add``), each report counted once.
    ``stamps``: each line's time where the caller knows it (a record's kernel time), instead of
    the time its prefix says."""

    def __init__(self, lines: Sequence[str], stamps: Sequence[Stamp | None] | None = None) -> None:
        self.events: list[LogEvent] = []
        self._lines = lines
        self._stamps = stamps
        self._xid79: dict[str | None, _Xid79] = {}
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
            self._xid79[event.device] = _Xid79(record, self._stamp_of(found.line_no))
        self.events.append(found)

    def _stamp_of(self, line_no: int) -> Stamp | None:
        if self._stamps is not None:
            return self._stamps[line_no - 1]
        return _stamp(self._lines[line_no - 1])

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
        if not _soon_after(xid.stamp, self._stamp_of(found.line_no)):
            return False
        xid.restated = True
        return True
