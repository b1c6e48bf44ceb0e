"""Kernel events folded into occurrences, and a fatal fault that survives reboots escalated.

An occurrence is one (host, kind, code, device) with a count and first/last seen: an Xid storm
is one row. A fatal occurrence seen again after ``escalate_after`` reboots (in more than that
many boots) is a hardware suspect, as the field's GPU-health daemons treat it: its events and
the occurrence get the action ``inspect_hardware``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Float, Integer, bindparam, case, func, select, update
from sqlalchemy.orm import Session

from collector import db
from collector.models import (
    KernelAction,
    KernelOccurrence,
    KernelOccurrenceBoot,
    Severity,
    table_of,
)
from collector.prepared import PerDialect, Prepared

DEFAULT_ESCALATE_AFTER = 2
_TABLE = table_of(KernelOccurrence)
_BOOTS = table_of(KernelOccurrenceBoot)


def occurrence_key(event: Any) -> tuple[str, str, str]:
    """(kind, code, device) of a classified event; '' where it has none."""
    return event.kind, (event.code or "")[:64], (event.device or "")[:64]


@dataclass
class _Group:
    key: tuple[str, str, str]
    rows: list[Any]
    occurrence_id: int | None = None


def assign_occurrences(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    rows: Sequence[Any],
    escalate_after: int = DEFAULT_ESCALATE_AFTER,
) -> dict[tuple[str, str, str], _Group]:
    """Find or create the occurrence of each row (``NewKernelEvent``s about to be stored), set
    their ``occurrence_id`` and escalate the fatal ones seen in too many boots. Counts are
    added by ``count_stored`` once it is known which rows were new."""
    groups: dict[tuple[str, str, str], _Group] = {}
    for row in rows:
        key = occurrence_key(row.event)
        groups.setdefault(key, _Group(key, [])).rows.append(row)
    for group in groups.values():
        kind, code, device = group.key
        first = min(group.rows, key=lambda r: r.ts)
        event = max(group.rows, key=lambda r: r.ts).event
        group.occurrence_id, action = (
            session.connection()
            .execute(
                _UPSERT(session),
                {
                    "host_id": host_id,
                    "kind": kind,
                    "code": code,
                    "device": device,
                    "first_ts": first.ts,
                    "last_ts": first.ts,
                    "severity": event.severity,
                    "action": event.action,
                    "meaning": event.meaning,
                },
            )
            .one()
        )
        if event.severity == Severity.FATAL:
            action = _boots_seen(session, group, boot_pk, first.ts, escalate_after) or action
        for row in group.rows:
            row.occurrence_id = group.occurrence_id
            if action == KernelAction.INSPECT_HARDWARE and row.event.fatal:
                row.event = replace(row.event, action=KernelAction.INSPECT_HARDWARE)
    return groups


def _boots_seen(
    session: Session, group: _Group, boot_pk: int, ts: float, escalate_after: int
) -> str | None:
    """Record this boot for a fatal occurrence; ``inspect_hardware`` once it has come back in
    more than ``escalate_after`` boots (after that many reboots). A boot already recorded
    changes nothing: a storm of fatal faults costs one statement a batch."""
    params = {"occurrence_id": group.occurrence_id, "boot_pk": boot_pk, "first_ts": ts}
    if not _NEW_BOOT(session).rowcount(session, **params):
        return None
    (boots,) = _BOOTS_COUNT.first(session, occurrence_id=group.occurrence_id) or (0,)
    escalated = boots > escalate_after
    update_ = _ESCALATE if escalated else _COUNT_BOOTS
    update_.rowcount(session, occurrence_id=group.occurrence_id, boots=boots)
    return KernelAction.INSPECT_HARDWARE if escalated else None


def _upsert(session: Session) -> Any:
    """Find or create an occurrence (a new one counts 0 until ``count_stored``); its id, action."""
    stmt = db.insert(session, _TABLE).values(
        **{name: bindparam(name) for name in _UPSERT_VALUES}, count=0, boots=1
    )
    return stmt.on_conflict_do_update(
        index_elements=["host_id", "kind", "code", "device"],
        set_={"severity": stmt.excluded.severity},
    ).returning(_TABLE.c.id, _TABLE.c.action)


_UPSERT_VALUES = (
    "host_id", "kind", "code", "device", "first_ts", "last_ts", "severity", "action", "meaning",
)  # fmt: skip
# Built once (per dialect): a storm runs them for every batch, and building one cost more CPU
# than running it.
_UPSERT = PerDialect(_upsert)
_OCCURRENCE = bindparam("occurrence_id", type_=Integer)
_NEW_BOOT = PerDialect(
    lambda session: Prepared(
        db.insert(session, _BOOTS)
        .values(
            occurrence_id=_OCCURRENCE,
            boot_pk=bindparam("boot_pk", type_=Integer),
            first_ts=bindparam("first_ts", type_=Float),
        )
        .on_conflict_do_nothing(index_elements=["occurrence_id", "boot_pk"])
    )
)
_BOOTS_COUNT = Prepared(select(func.count()).where(_BOOTS.c.occurrence_id == _OCCURRENCE))
_OCCURRENCE_SET = update(_TABLE).where(_TABLE.c.id == _OCCURRENCE)
_COUNT_BOOTS = Prepared(_OCCURRENCE_SET.values(boots=bindparam("boots", type_=Integer)))
_ESCALATE = Prepared(
    _OCCURRENCE_SET.values(
        boots=bindparam("boots", type_=Integer), action=KernelAction.INSPECT_HARDWARE.value
    )
)
_LO, _HI = bindparam("lo", type_=Float), bindparam("hi", type_=Float)
_COUNT = Prepared(
    _OCCURRENCE_SET.values(
        count=_TABLE.c.count + bindparam("n", type_=Integer),
        first_ts=case((_TABLE.c.first_ts > _LO, _LO), else_=_TABLE.c.first_ts),
        last_ts=case((_TABLE.c.last_ts < _HI, _HI), else_=_TABLE.c.last_ts),
    )
)


def count_stored(
    session: Session, groups: dict[tuple[str, str, str], _Group], stored_ids: set[int]
) -> None:
    """Add the rows actually stored (not duplicates of another channel) to their occurrences."""
    for group in groups.values():
        new = [r for r in group.rows if r.line_id in stored_ids]
        if not new:
            continue
        lo, hi = min(r.ts for r in new), max(r.ts for r in new)
        _COUNT.rowcount(session, occurrence_id=group.occurrence_id, n=len(new), lo=lo, hi=hi)
