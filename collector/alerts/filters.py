"""Which events a target takes: event patterns (``incident.*``) and a kernel.event severity floor.

A kernel event whose severity is missing or unknown passes every floor: a filter may quieten
known-minor events, never silence one it cannot rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from collector.models import Severity

EVENTS = ("incident.opened", "incident.resolved", "kernel.event", "guard.fired")
KERNEL_EVENT = "kernel.event"
# Lowest first: the kernel classifier's severities.
SEVERITIES = tuple(Severity)
RANK: dict[str, int] = {name.value: i for i, name in enumerate(SEVERITIES)}


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """The patterns, each of which must match a known event (else ValueError)."""
    cleaned = [p.strip() for p in patterns if p.strip()]
    for pattern in cleaned:
        if not any(fnmatchcase(event, pattern) for event in EVENTS):
            raise ValueError(f"{pattern!r} matches no event; events are {', '.join(EVENTS)}")
    return cleaned


def check_severity(severity: str | None) -> str | None:
    if severity in (None, ""):
        return None
    if severity not in RANK:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    return severity


def highest(severities: Iterable[str | None]) -> str | None:
    """The highest known severity; None when any is missing or unknown (it outranks a floor)."""
    ranked = list(severities)
    if not ranked or any(s not in RANK for s in ranked):
        return None
    return max(ranked, key=lambda s: RANK[s or ""])


def wants(
    events: Sequence[str] | None, min_severity: str | None, *, event: str, severity: str | None
) -> bool:
    """Whether a target with this filter takes ``event`` (of ``severity``, for kernel events)."""
    if events and not any(fnmatchcase(event, pattern) for pattern in events):
        return False
    if event != KERNEL_EVENT or min_severity not in RANK or severity not in RANK:
        return True
    return RANK[severity] >= RANK[min_severity]
