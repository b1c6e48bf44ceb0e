"""Which kernel event a kernel record announces, for the guard's ``kernel_event`` rules.

The verdict is the collector's own: both use ``agent.kernel`` (standard library only), so a
rule written from what the collector showed trips on exactly the same lines. Most records fail
the classifier's first substring test and cost nothing more.
"""

from __future__ import annotations

from typing import Any

from agent.kernel.classify import classify_kernel_line
from agent.kernel.event import KernelEvent, make_event
from agent.kernel.nvidia import xid_advice


def match_record(line: dict[str, Any]) -> KernelEvent | None:
    """The event a kernel record announces, or None."""
    source = line.get("source")
    if source == "journal":  # NVML's own Xid report (agent.sources.gpu): a second witness
        fields = line.get("fields") or {}
        code = fields.get("xid")
        if fields.get("origin") != "nvml" or not isinstance(code, int):
            return None
        advice, meaning = xid_advice(code, "")
        return make_event("xid", advice, xid=code, meaning=meaning)
    if source not in ("kmsg", "netconsole"):
        return None
    return classify_kernel_line(line.get("text") or "")


def matches(kind: str, qualifier: str | int | None, event: KernelEvent) -> bool:
    """Does a rule's ``kind qualifier`` (``xid fatal``, ``xid 79``, ``nv_err NV_ERR_X``) cover
    the event?"""
    if event.kind != kind:
        return False
    if qualifier is None:
        return True
    if qualifier == "fatal":
        return event.fatal
    return qualifier in (event.xid, event.nv_err)
