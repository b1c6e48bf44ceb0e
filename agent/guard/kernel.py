"""Which kernel event a kernel record announces, as far as a guard rule needs to know.

A small matcher of its own (the agent imports nothing from the collector): the kind names are
the collector classifier's (``agent.wire.KERNEL_EVENT_KINDS``), and tests hold the two to the
same verdicts, so a rule written from what the collector showed trips on the same lines. Most
records fail the first substring test and cost nothing more.
"""

from __future__ import annotations

import re
from typing import Any

from agent.wire import XID_FATAL_CODES

_XID = re.compile(r"\bXid \([^)]*\):\s*(\d+)")
_NV_ERR = re.compile(r"\bNV_ERR_[A-Z0-9_]+")
_GSP = re.compile(
    r"GSP.*(?:[Tt]imeout|[Ee]rror|exception|[Ff]ail)|(?:[Tt]imeout|[Ff]ail|sanity check).*GSP"
)
_UVM_BAD = re.compile(r"[Ee]rror|[Ff]atal|[Ff]ault|[Ff]ail|[Tt]imeout|ECC|[Aa]ssert")
_NV_ASSERT = re.compile(r"\bnv(?:Check|Assert)\w*Failed\w*:")
# (kind, substring every such record has, the pattern that confirms it)
_GENERIC = (
    ("soft_lockup", "lockup", re.compile(r"soft lockup - CPU#\d+ stuck for \d+s!\s*\[.*:\d+\]")),
    ("soft_lockup", "LOCKUP", re.compile(r"hard LOCKUP on cpu \d+")),
    ("hung_task", "blocked for more", re.compile(r"\btask .+:\d+ blocked for more than \d+")),
    ("rcu_stall", "stall", re.compile(r"\brcu_\w+ (?:self-)?detected (?:expedited )?stalls?\b")),
    ("oom_kill", "Killed process", re.compile(r"Killed process \d+ \(.*?\)")),
    ("oom_kill", "oom-killer", re.compile(r"^.+? invoked oom-killer:")),
    ("oom_kill", "Out of memory and no killable", None),
    ("alloc_failure", "allocation failure", re.compile(r"^.+?: page allocation failure: order:\d")),
    ("alloc_failure", "vmalloc error", re.compile(r"^.+?: vmalloc error:")),
)


def match_record(line: dict[str, Any]) -> tuple[str, str | int | None] | None:
    """(kind, detail) of a kernel record, or None. ``detail``: the Xid code, the NV_ERR name."""
    source = line.get("source")
    if source == "journal":  # NVML's own Xid report (agent.sources.gpu): a second witness
        fields = line.get("fields") or {}
        code = fields.get("xid")
        return ("xid", code) if fields.get("origin") == "nvml" and isinstance(code, int) else None
    if source not in ("kmsg", "netconsole"):
        return None
    text = (line.get("text") or "").strip()
    if "NVRM" in text or "NV_ERR_" in text or "nvidia-uvm" in text:
        found = _nvidia(text)
        if found is not None:
            return found
    for kind, needle, pattern in _GENERIC:
        if needle in text and (pattern is None or pattern.search(text)):
            return kind, None
    return None


def _nvidia(text: str) -> tuple[str, str | int | None] | None:
    if "Xid" in text and (m := _XID.search(text)) is not None:
        return "xid", int(m.group(1))
    if "fallen off the bus" in text:
        return "bus_off", None
    nv = _NV_ERR.search(text) if "NV_ERR_" in text else None
    if nv is not None or ("Failed" in text and _NV_ASSERT.search(text)):
        return "nv_err", nv.group(0) if nv else None
    if "GSP" in text and _GSP.search(text):
        return "gsp", None
    if "nvidia-uvm" in text and "Loaded the UVM driver" not in text and _UVM_BAD.search(text):
        return "uvm", None
    return None


def matches(kind: str, qualifier: str | int | None, found: tuple[str, str | int | None]) -> bool:
    """Does a rule's ``kind qualifier`` cover what ``match_record`` found?"""
    if found[0] != kind:
        return False
    if qualifier is None:
        return True
    if qualifier == "fatal":
        return found[1] in XID_FATAL_CODES
    return found[1] == qualifier
