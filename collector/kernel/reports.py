"""A saved log's events with each multi-line report counted once, and only lines of the same
report joined: an NVSwitch SXid's verdict and its dump, an Xid 79 and the driver's own "GPU has
fallen off the bus." line after it.

The NVSwitch driver prints an SXid's verdict ("22013, Non-fatal, Link 44 ...") and then its
error entry's dump ("22013, Severity 0 Engine instance 44 ...", "22013, Data {...}"), sometimes
two entries per verdict; switches that report at once interleave their lines. A dump joins the
report of its own switch and SXid whose verdict came last, while it is near (``SXID_GAP``
records since that report's previous line) and, for a Severity line, of its link. A dump before
any such verdict is a report whose verdict the capture cut off: its own occurrence, as bad as
its switch's next verdict of the same SXid says if that follows near it.

The driver's "GPU <address>: GPU has fallen off the bus." right after the Xid 79 that said it
of the same GPU restates it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from agent.kernel.event import KernelEvent

# Records between one line of an SXid report and the next: four switches interleaving put six
# between (a quoted paste doubles that with its blank '>' lines).
SXID_GAP = 16
_SXID_DUMP = ("Severity ", "Data {")
_VERDICTS = ("fatal", "non-fatal")
_LINK = re.compile(r"\bLink (\d{1,4})\b")
_INSTANCE = re.compile(r"^Severity \d{1,3} Engine instance (\d{1,4})\b")


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
    verdict: bool  # started by its verdict line (else a dump whose verdict was cut off)


def _number(pattern: re.Pattern[str], text: str | None) -> int | None:
    m = pattern.search(text or "")
    return int(m.group(1)) if m else None


class Reports:
    """The events of one saved log as they are read (``add``), each report counted once."""

    def __init__(self) -> None:
        self.events: list[LogEvent] = []
        self._sxid: dict[tuple[str | None, str | None], _Report] = {}

    def add(self, record: int, found: LogEvent) -> None:
        """``found``, of the ``record``-th record, unless it restates a report already counted."""
        event = found.event
        if event.kind == "sxid":
            if self._sxid_joins(record, event):
                return
        elif event.kind == "bus_off" and self._restates_xid79(event):
            return
        self.events.append(found)

    def _sxid_joins(self, record: int, event: KernelEvent) -> bool:
        key = (event.pci, event.code)
        report = self._sxid.get(key)
        near = report is not None and record - report.record <= SXID_GAP
        if not (event.detail or "").startswith(_SXID_DUMP):  # a verdict: a new report
            said = (event.detail or "").split(",", 1)[0].strip().lower()
            if report is not None and near and not report.verdict and said in _VERDICTS:
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
        self._sxid[key] = _Report(len(self.events), record, instance, False)
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

    def _restates_xid79(self, event: KernelEvent) -> bool:
        last = self.events[-1].event if self.events else None
        return (
            last is not None
            and (last.kind, last.code) == ("xid", "79")
            and (last.device == event.device)
        )
