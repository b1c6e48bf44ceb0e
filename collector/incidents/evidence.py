"""What a host has told of a silence it came back from: the longest hole among its samples and
whether they reach the return, and whether it has been silent again since (its evidence then
waits for that silence's end). ``lifecycle.settle_incidents`` decides from them."""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import ColumnElement, exists, select
from sqlalchemy.orm import Session, aliased

from collector.hosts.registry import find_boot_pk
from collector.models import Host, Incident, IncidentState, Sample


def sample_hole(
    session: Session, *, incident: Incident, host: Host, near_s: float, whole: bool = False
) -> tuple[float | None, bool]:
    """(longest hole between the agent's samples since the silence began, reached the return).

    "Reached the return" means the run holds a sample received after the host came back and
    taken at most ``near_s`` before it (the return read on the agent's clock through its
    measured offset): a replay that ends where the host froze is received after the return
    too, but the hole after it is not in the run yet. ``whole``: every sample stored since is
    looked at (the replay is complete), not only those up to the one that reached the return.
    """
    boot = find_boot_pk(session, host_id=host.id, boot_id=incident.return_boot_id)
    if boot is None or incident.last_sample_ts is None or incident.returned_at is None:
        return None, False
    rows = session.execute(
        select(Sample.ts, Sample.received_at)
        .where(Sample.boot_pk == boot, Sample.ts >= incident.last_sample_ts)
        .order_by(Sample.ts)
    ).all()
    returned = incident.returned_at.timestamp()
    offset = host.clock_offset_s  # our clock minus the agent's
    taken_since = -math.inf if offset is None else returned - offset - near_s
    longest, previous, reached = 0.0, incident.last_sample_ts, False
    for ts, received_at in rows:
        longest = max(longest, ts - previous)
        previous = ts
        # received_at: same batch as the return at the earliest (datetime rounding)
        if received_at >= returned - 0.01 and ts >= taken_since:
            reached = True
            if not whole:
                break
    return longest, reached


def silent_again(session: Session, incident: Incident) -> tuple[bool, datetime | None]:
    """(whether the host has had another incident since ``incident``, when it was last back
    from it). None: it is silent now; its batches, the rest of ``incident``'s evidence with
    them, come only once that silence ends. A pause lifted while silent counts as its end."""
    later = session.execute(
        select(Incident.state, Incident.returned_at, Incident.resolved_at)
        .where(Incident.host_id == incident.host_id, Incident.id > incident.id)
        .order_by(Incident.id.desc())
        .limit(1)
    ).first()
    if later is None:
        return False, None
    state, returned_at, resolved_at = later
    return True, None if state == IncidentState.OPEN else returned_at or resolved_at


_LATER = aliased(Incident)


def silent_now() -> ColumnElement[bool]:
    """``silent_again``'s "silent now" as SQL on ``Incident``: a later incident of its host is
    open (a host has one open incident at most, the latest). What settles only reads the
    incidents where it is false: nothing can be decided for the others before that silence
    ends (a host back and then gone for good would have them looked at every tick)."""
    return exists().where(
        _LATER.host_id == Incident.host_id,
        _LATER.id > Incident.id,
        _LATER.state == IncidentState.OPEN,
    )
