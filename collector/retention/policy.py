"""Days kept per kind for one host: the host's own ``retention`` over the collector defaults."""

from __future__ import annotations

from collections.abc import Mapping

from collector.models import RETENTION_KINDS, Host
from collector.settings import Settings

# Days per kind; None: kept until deleted.
Policy = dict[str, float | None]


def defaults(settings: Settings) -> dict[str, float]:
    """The FREEZEWATCH_RETAIN_<KIND>_DAYS values (0: kept until deleted)."""
    return {kind: float(getattr(settings, f"retain_{kind}_days")) for kind in RETENTION_KINDS}


def host_policy(settings: Settings, overrides: Mapping[str, float] | None) -> Policy:
    """Days each kind of a host's data is kept. Urgent kernel lines are lines too: they are never
    kept for less than the other lines."""
    days = defaults(settings) | {k: float(v) for k, v in (overrides or {}).items()}
    policy: Policy = {kind: (value or None) for kind, value in days.items()}
    lines, kernel = policy["lines"], policy["kernel_lines"]
    policy["kernel_lines"] = None if lines is None or kernel is None else max(lines, kernel)
    return policy


def policy_for(settings: Settings, host: Host) -> Policy:
    return host_policy(settings, host.retention)


def cutoffs(policy: Policy, *, now: float) -> dict[str, float | None]:
    """Epoch seconds before which each kind is pruned (None: nothing is)."""
    return {kind: None if days is None else now - days * 86400 for kind, days in policy.items()}
