"""NVLink5 Xids 144-150: the sub-fields the driver prints and NVIDIA's decode of them.

``NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000
...)``: the unit, the driver's own fatal/non-fatal verdict, the link, then registers whose first
two are intrinfo and error status. NVIDIA's decode sheet (``data/nvlink_decode.tsv``) maps
(intrinfo pattern, error status) to a resolution; bits 20-25 of intrinfo are the sub-code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from agent.kernel.xid_catalog import read_tsv

NVLINK_XIDS = range(144, 151)
_FIELDS = re.compile(
    r"^(?P<unit>[A-Z][A-Z0-9_/]*)\s+(?P<sev>Fatal|Nonfatal|Non-fatal)\s+XC(?P<xc>\d+)\s+"
    r"i(?P<inst>\d+)\s+Link\s+(?P<link>-?\d+)"
    r"(?:\s+\((?P<regs>0x[0-9a-fA-F]+(?:\s+0x[0-9a-fA-F]+)*))?"
)
_RESOLUTION_ACTION = {"RESET_GPU": "reset_gpu", "IGNORE": "none", "XID_154_EVAL": "none"}
_SEVERITY = {"Fatal": "fatal", "Link Fatal": "error", "Non-fatal": "warning"}


@dataclass(frozen=True)
class NvlinkDecode:
    """What an NVLink Xid line says, decoded."""

    unit: str
    fatal: bool  # the driver's own verdict
    severity: str  # the decode's: a link-fatal error the GPU survives is an error
    link: int
    intrinfo: int
    error_status: int
    sub_code: int
    action: str
    investigatory: str | None
    registers: bool = True  # False: the report left them out

    def describe(self) -> str:
        verdict = "fatal" if self.fatal else "non-fatal"
        hint = f"; investigate: {self.investigatory}" if self.investigatory else ""
        if not self.registers:
            return f"{self.unit} {verdict} on link {self.link}{hint}"
        return (
            f"{self.unit} {verdict} on link {self.link} (sub-code {self.sub_code}, "
            f"error status 0x{self.error_status:08x}){hint}"
        )


@dataclass(frozen=True)
class _Rule:
    xid: int
    unit: str
    patterns: tuple[tuple[int, int], ...]  # (mask, value) per intrinfo pattern
    error_status: int
    resolution: str
    investigatory: str
    severity: str


def _mask(pattern: str) -> tuple[int, int]:
    mask = value = 0
    for ch in pattern:
        mask, value = mask << 1, value << 1
        if ch in "01":
            mask |= 1
            value |= ch == "1"
    return mask, value


@cache
def _rules() -> dict[int, list[_Rule]]:
    out: dict[int, list[_Rule]] = {}
    for xid, unit, v1, v2, status, resolution, investigatory, severity, _hw in read_tsv(
        "nvlink_decode.tsv"
    ):
        patterns = (_mask(v1), _mask(v2))
        rule = _Rule(int(xid), unit, patterns, int(status, 16), resolution, investigatory, severity)
        out.setdefault(rule.xid, []).append(rule)
    return out


def _match(xid: int, unit: str, intrinfo: int, status: int) -> _Rule | None:
    rules = _rules().get(xid, [])
    for rule in rules:
        if rule.error_status == status and any(intrinfo & m == v for m, v in rule.patterns):
            return rule
    # An intrinfo layout we do not know: the unit name and status still pick the rule.
    for rule in rules:
        if rule.error_status == status and unit in rule.unit.split("/"):
            return rule
    return None


def decode_nvlink(xid: int, rest: str) -> NvlinkDecode | None:
    """The decoded sub-fields of an NVLink Xid's text after the code, or None if absent."""
    m = _FIELDS.match(rest)
    if m is None:
        return None
    # registers a report left out ("Link 11 (...)"): the driver's own verdict still stands
    regs = [int(r, 16) for r in (m.group("regs") or "").split()]
    intrinfo, status = [*regs, 0, 0][:2]
    fatal = m.group("sev") == "Fatal"
    rule = _match(xid, m.group("unit"), intrinfo, status) if regs else None
    if rule is not None:  # XID_154_EVAL: the Xid 154 that follows names the action
        action = _RESOLUTION_ACTION.get(rule.resolution, "reset_gpu")
        severity = _SEVERITY.get(rule.severity.rstrip("*?"), "error")
        if action == "reset_gpu":  # whatever the sheet calls it, the GPU cannot go on
            severity = "fatal"
    else:
        action = "reset_gpu" if fatal else "none"
        severity = "fatal" if fatal else "warning"
    investigatory = rule.investigatory if rule else None
    if investigatory in ("", "IGNORE"):
        investigatory = None
    return NvlinkDecode(
        unit=m.group("unit"),
        fatal=fatal,
        severity=severity,
        link=int(m.group("link")),
        intrinfo=intrinfo,
        error_status=status,
        sub_code=(intrinfo >> 20) & 0x3F,
        action=action,
        investigatory=investigatory,
        registers=bool(regs),
    )
