"""The hosts overview's page: hosts filtered by status, name and labels, sorted by name, a page
of them at a time. A fleet is hundreds of hosts, so the filtering is over the host rows alone;
what each listed host shows (its latest sample, its board) is read for the page only."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector.hosts import labels as host_labels
from collector.models import Host, HostStatus

MAX_PAGE = 500


@dataclass
class HostFilter:
    """``statuses``: any of them (none: all); ``name``: a case-insensitive part of the name;
    ``labels``: (key, value or None for any value), all of them."""

    statuses: list[HostStatus] = field(default_factory=list)
    name: str | None = None
    labels: list[tuple[str, str | None]] = field(default_factory=list)

    @classmethod
    def parse(
        cls, *, statuses: list[HostStatus] | None, name: str | None, labels: list[str] | None
    ) -> HostFilter:
        """From query parameters (``label`` as ``key=value`` or ``key``); ValueError if a label
        is not one."""
        wanted = [host_labels.parse(spec) for spec in labels or [] if spec.strip()]
        return cls(statuses=list(statuses or []), name=(name or "").strip() or None, labels=wanted)


def find_hosts(
    session: Session, *, where: HostFilter, limit: int | None = None, offset: int = 0
) -> tuple[list[Host], int]:
    """(the page of hosts ``where`` selects, by name, and how many it selects in all)."""
    query = select(Host).order_by(Host.name)
    if where.statuses:
        query = query.where(Host.status.in_(where.statuses))
    if where.name:
        query = query.where(func.lower(Host.name).contains(where.name.lower(), autoescape=True))
    hosts = [h for h in session.scalars(query) if host_labels.matches(h, where.labels)]
    end = None if limit is None else offset + limit
    return hosts[offset:end], len(hosts)
