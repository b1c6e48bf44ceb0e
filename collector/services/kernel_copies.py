"""A frozen boot's journal records, matched to the copies other channels already stored.

After a reboot the agent's catch-up ships the previous boot's kernel journal. journald does
not keep the kmsg seq, so those records carry no ``kseq`` and cannot meet the (boot, kseq)
key that joins the agent's and netconsole's copies of one record: the lines netconsole
brought during the freeze, and the last seconds the agent had already sent, would be stored
twice (and a GPU fault alert twice). What every copy does carry is the kernel's monotonic
usec (``_SOURCE_MONOTONIC_TIMESTAMP`` from kmsg and journald, ``usec`` from netconsole) and
the text: within a boot, (usec, text) names the record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Line
from collector.schemas import WireLine

SCAN_PAGE = 2000
# Rows read back for one batch at most: a catch-up is the tail of its boot, not all of it.
SCAN_LIMIT = 200_000

RecordKey = tuple[int, str]  # (kernel usec, stored text)


class StoredCopy(NamedTuple):
    id: int
    channels: int


def kernel_usec(fields: Mapping[str, Any] | None) -> int | None:
    """The kernel's monotonic usec of a stored or wire record, whichever channel wrote it."""
    if not fields:
        return None
    value = fields.get("_SOURCE_MONOTONIC_TIMESTAMP", fields.get("usec"))
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def unkeyed_kernel_usec(line: WireLine) -> int | None:
    """The usec of a kernel record that came without its kseq (the journal's), else None."""
    if line.kseq is not None or line.source != "kmsg":
        return None
    return kernel_usec(line.fields)


def stored_copies(
    session: Session, *, boot_pk: int, records: Sequence[RecordKey]
) -> list[StoredCopy | None]:
    """For each (usec, text), in order, the row another channel stored for that record.

    Reads the boot's keyed rows from the newest kseq down to the oldest usec asked for (kseq
    and usec grow together). Equal records pair up in kernel order, each copy used once.
    """
    if not records:
        return []
    wanted = set(records)
    oldest = min(usec for usec, _ in records)
    found: dict[RecordKey, list[StoredCopy]] = {}
    below: int | None = None
    scanned = 0
    while scanned < SCAN_LIMIT:
        query = select(Line.id, Line.kseq, Line.text, Line.fields, Line.channels).where(
            Line.boot_pk == boot_pk, Line.kseq.is_not(None)
        )
        if below is not None:
            query = query.where(Line.kseq < below)
        rows = session.execute(query.order_by(Line.kseq.desc()).limit(SCAN_PAGE)).all()
        scanned += len(rows)
        past_oldest = False
        for line_id, _kseq, text, fields, channels in rows:
            usec = kernel_usec(fields)
            if usec is None:
                continue
            if usec < oldest:
                past_oldest = True
                break
            if (usec, text) in wanted:
                found.setdefault((usec, text), []).append(StoredCopy(line_id, channels))
        if past_oldest or len(rows) < SCAN_PAGE:
            break
        below = rows[-1].kseq
    for copies in found.values():
        copies.reverse()  # read newest first; pair oldest first
    return [found[key].pop(0) if found.get(key) else None for key in records]
