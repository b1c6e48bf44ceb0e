"""Live ingest's half of "an oops is one event, in the module it happened in".

The die (or lockup) line is stored as the event as soon as it arrives; the ``RIP:``/``pc :``
line that names the module comes a few lines later, often in a later batch. Each channel hands
its site lines here after storing its events, and the latest unattributed oops or lockup of
that host and boot within ``REPORT_S`` before the line gets the module.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from agent.kernel.generic import oops_site
from collector.kernel.records import ATTRIBUTED_KINDS
from collector.models import KernelEventRow, table_of

REPORT_S = 30.0  # a report's RIP/pc line comes within this long after its die/lockup line
# netconsole stamps records with their arrival: the die line may arrive a little later
SKEW_S = 1.0

Site = tuple[float, str, str | None]  # (line ts, function, module)


def site_of(text: str) -> tuple[str, str | None] | None:
    """(function, module) of a RIP/IP/pc line that names a module, else None (cheap for others)."""
    if "IP: " not in text and "pc : " not in text:
        return None
    site = oops_site(text)
    return site if site is not None and site[1] is not None else None


def attribute_reports(
    session: Session, *, host_id: int, boot_pk: int, sites: Sequence[Site]
) -> int:
    """Give each site line's module to the oops/lockup event it belongs to; returns how many."""
    if not sites:
        return 0
    lo = min(ts for ts, _f, _m in sites) - REPORT_S
    hi = max(ts for ts, _f, _m in sites) + SKEW_S
    t = table_of(KernelEventRow)
    candidates = session.execute(
        select(t.c.id, t.c.ts, t.c.meaning)
        .where(
            t.c.host_id == host_id,
            t.c.boot_pk == boot_pk,
            t.c.ts >= lo,
            t.c.ts <= hi,
            t.c.kind.in_(ATTRIBUTED_KINDS),
            t.c.module.is_(None),
        )
        .order_by(t.c.ts, t.c.id)
    ).all()
    updates = []
    taken: set[int] = set()
    for ts, function, module in sorted(sites):
        owner = None
        for cand in candidates:
            if cand.id not in taken and ts - REPORT_S <= cand.ts <= ts + SKEW_S:
                owner = cand  # the latest one before the site line wins
        if owner is None:
            continue
        taken.add(owner.id)
        meaning = f"{owner.meaning or 'kernel report'} in [{module}] at {function}"
        updates.append({"eid": owner.id, "m": module, "text": meaning[:4000]})
    if updates:
        session.connection().execute(
            update(t)
            .where(t.c.id == bindparam("eid"))
            .values(module=bindparam("m"), meaning=bindparam("text")),
            updates,
        )
    return len(updates)
