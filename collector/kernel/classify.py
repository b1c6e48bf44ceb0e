"""Classify one kernel log message into a named event (NVIDIA driver faults, freeze precursors).

Called on every ingested kernel line: a cheap substring precheck rejects ordinary lines before
any regex runs. Input is the message text only (no dmesg/syslog/kmsg prefix). Benign driver
chatter (module load banners, GPU UUID/serial lines) yields None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.wire import KERNEL_EVENT_KINDS
from collector.kernel.xid_table import xid_meaning

GPU_FAULT_KINDS = frozenset({"xid", "nv_err", "gsp", "uvm", "bus_off"})
# The kinds' names are shared with the agent (its guard matches them on the host).
EVENT_KINDS = KERNEL_EVENT_KINDS


@dataclass(frozen=True)
class KernelEvent:
    """A classified kernel message; fields a kind doesn't carry are None."""

    kind: str
    xid: int | None = None
    pci: str | None = None
    pid: int | None = None
    process: str | None = None
    meaning: str | None = None
    nv_err: str | None = None
    call_site: str | None = None
    detail: str | None = None


# Every event needs one of these substrings; ordinary lines fail all tests in C speed.
_PRECHECK = (
    "NVRM",
    "NV_ERR_",
    "nvidia-uvm",
    "lockup",
    "LOCKUP",
    "blocked for more than",
    "stall",
    "Killed process",
    "oom-killer",
    "Out of memory",
    "allocation failure",
    "vmalloc error",
)

# NVRM: Xid (PCI:000f:01:00): 119, pid=3849, name=KMS thread, Timeout after 45s ...
# Old drivers print "Xid (0000:01:00)" without "PCI:"; MIG adds " GPU-I:01 GPU-CI:00".
_XID = re.compile(
    r"\bXid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)"
    r"(?P<mig>[^)]*)\):\s*(?P<code>\d+)(?:,\s*(?P<rest>.*))?"
)
_XID_PROC = re.compile(r"^pid=(?P<pid>'?[^,]*?'?),\s*name=(?P<name>[^,]*?),\s*(?P<rest>.*)$")
_XID_PID_ONLY = re.compile(r"^pid=(?P<pid>'?[^,]*?'?),\s*(?P<rest>.*)$")
_NV_ERR = re.compile(r"\bNV_ERR_[A-Z0-9_]+")
# Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from f(x) @ file.c:1359
_NV_STATUS_DESC = re.compile(r"(?:Check|Assertion) failed: (?P<desc>[^\[]*?)\s*\[NV_ERR_")
_CALL_SITE = re.compile(
    r"returned from (?P<func>[A-Za-z_][\w:]*)(?:\([^@]*\))?\s*@\s*(?P<file>[\w./-]+:\d+)"
)
_NV_ASSERT = re.compile(r"\bnv(?:Check|Assert)\w*Failed\w*:")
_BUS_OFF_PCI = re.compile(
    r"\bGPU (?:at PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)"
)
_GSP = re.compile(
    r"GSP.*(?:[Tt]imeout|[Ee]rror|exception|[Ff]ail)|(?:[Tt]imeout|[Ff]ail|sanity check).*GSP"
)
_UVM_BAD = re.compile(r"[Ee]rror|[Ff]atal|[Ff]ault|[Ff]ail|[Tt]imeout|ECC|[Aa]ssert")
_SOFT_LOCKUP = re.compile(
    r"soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<secs>\d+)s!\s*\[(?P<comm>.*):(?P<pid>\d+)\]"
)
_HARD_LOCKUP = re.compile(r"hard LOCKUP on cpu (?P<cpu>\d+)")
_HUNG_TASK = re.compile(r"\btask (?P<comm>.+):(?P<pid>\d+) blocked for more than (?P<secs>\d+)")
_RCU_STALL = re.compile(r"\brcu_\w+ (?:self-)?detected (?:expedited )?stalls?\b")
_OOM_KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<comm>.*?)\)")
_OOM_INVOKED = re.compile(r"^(?P<comm>.+?) invoked oom-killer:")
_ALLOC_FAIL = re.compile(
    r"^(?P<comm>.+?): (?:page allocation failure: order:(?P<order>\d+)|vmalloc error:)"
)


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip("'\" ")
    return int(value) if value.isdigit() else None


def _classify_xid(text: str) -> KernelEvent | None:
    m = _XID.search(text)
    if m is None:
        return None
    code = int(m.group("code"))
    rest = m.group("rest") or ""
    pid: int | None = None
    process: str | None = None
    pm = _XID_PROC.match(rest)
    if pm:
        pid, process, rest = (
            _int_or_none(pm.group("pid")),
            pm.group("name").strip(),
            pm.group("rest"),
        )
        if process.strip("'<>") in ("unknown", ""):
            process = None
    else:
        pm = _XID_PID_ONLY.match(rest)
        if pm:
            pid, rest = _int_or_none(pm.group("pid")), pm.group("rest")
    return KernelEvent(
        kind="xid",
        xid=code,
        pci=m.group("pci").lower(),
        pid=pid,
        process=process,
        meaning=xid_meaning(code),
        detail=rest.strip() or None,
    )


def _classify_nvidia(text: str) -> KernelEvent | None:
    if "Xid" in text:
        event = _classify_xid(text)
        if event is not None:
            return event
    if "fallen off the bus" in text:
        m = _BUS_OFF_PCI.search(text)
        return KernelEvent(
            kind="bus_off",
            pci=m.group("pci").lower() if m else None,
            meaning="GPU has fallen off the bus",
            detail=text.strip(),
        )
    nv = _NV_ERR.search(text) if "NV_ERR_" in text else None
    if nv is not None or ("Failed" in text and _NV_ASSERT.search(text)):
        desc = _NV_STATUS_DESC.search(text)
        site = _CALL_SITE.search(text)
        return KernelEvent(
            kind="nv_err",
            nv_err=nv.group(0) if nv else None,
            meaning=desc.group("desc").strip() if desc else None,
            call_site=f"{site.group('func')} @ {site.group('file')}" if site else None,
            detail=text.strip(),
        )
    if "GSP" in text and _GSP.search(text):
        return KernelEvent(
            kind="gsp", meaning="GSP firmware error or RPC timeout", detail=text.strip()
        )
    if "nvidia-uvm" in text and "Loaded the UVM driver" not in text and _UVM_BAD.search(text):
        return KernelEvent(kind="uvm", meaning="nvidia-uvm error", detail=text.strip())
    return None


def _classify_generic(text: str) -> KernelEvent | None:
    if "lockup" in text or "LOCKUP" in text:
        m = _SOFT_LOCKUP.search(text)
        if m:
            return KernelEvent(
                kind="soft_lockup",
                pid=int(m.group("pid")),
                process=m.group("comm"),
                meaning=f"CPU#{m.group('cpu')} stuck for {m.group('secs')}s (soft lockup)",
                detail=text.strip(),
            )
        m = _HARD_LOCKUP.search(text)
        if m:
            return KernelEvent(
                kind="soft_lockup",
                meaning=f"hard lockup on CPU {m.group('cpu')}",
                detail=text.strip(),
            )
    if "blocked for more than" in text:
        m = _HUNG_TASK.search(text)
        if m:
            return KernelEvent(
                kind="hung_task",
                pid=int(m.group("pid")),
                process=m.group("comm"),
                meaning=f"task blocked for more than {m.group('secs')} seconds",
                detail=text.strip(),
            )
    if "stall" in text and _RCU_STALL.search(text):
        return KernelEvent(kind="rcu_stall", meaning="RCU stall detected", detail=text.strip())
    if "Killed process" in text:
        m = _OOM_KILLED.search(text)
        if m:
            return KernelEvent(
                kind="oom_kill",
                pid=int(m.group("pid")),
                process=m.group("comm"),
                meaning="process killed by the OOM killer",
                detail=text.strip(),
            )
    if "oom-killer" in text:
        m = _OOM_INVOKED.search(text.strip())
        if m:
            return KernelEvent(
                kind="oom_kill",
                process=m.group("comm"),
                meaning="OOM killer invoked",
                detail=text.strip(),
            )
    if "Out of memory and no killable processes" in text:
        return KernelEvent(
            kind="oom_kill", meaning="out of memory, nothing to kill", detail=text.strip()
        )
    if "allocation failure" in text or "vmalloc error" in text:
        m = _ALLOC_FAIL.search(text.strip())
        if m:
            order = m.group("order")
            return KernelEvent(
                kind="alloc_failure",
                process=m.group("comm"),
                meaning=f"page allocation failure (order {order})"
                if order is not None
                else "vmalloc failure",
                detail=text.strip(),
            )
    return None


def classify_kernel_line(text: str) -> KernelEvent | None:
    """The event a kernel message announces, or None for ordinary and benign lines."""
    for needle in _PRECHECK:  # a plain loop: several times cheaper than any(<genexpr>)
        if needle in text:
            break
    else:
        return None
    if "NVRM" in text or "NV_ERR_" in text or "nvidia-uvm" in text:
        event = _classify_nvidia(text)
        if event is not None:
            return event
    return _classify_generic(text)
