"""A frozen boot's journal records, matched to the copies other channels already stored.

After a reboot the agent's catch-up ships the previous boot's kernel journal. journald does
not keep the kmsg seq, so those records carry no ``kseq`` and cannot meet the (boot, kseq)
key that joins the agent's and netconsole's copies of one record: the lines netconsole
brought during the freeze, and the last seconds the agent had already sent, would be stored
twice (and a GPU fault alert twice). What every copy does carry is the kernel's monotonic
usec (``_SOURCE_MONOTONIC_TIMESTAMP`` from kmsg and journald, ``usec`` from netconsole) and
the text: within a boot, (usec, text) names the record. The copies are looked up through
the (host, ts) index, in a window wide enough for the two hosts' clocks to disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.kernel.restated import kernel_usec
from collector.models import Line
from collector.schemas import WireLine

# The copies are looked for among the boot's keyed rows stamped near the records: netconsole
# rows carry the collector's clock, journal and kmsg rows the host's, so the window allows
# this much clock difference between the two hosts.
CLOCK_SKEW_S = 300.0
SCAN_LIMIT = 200_000  # rows read back for one batch at most

RecordKey = tuple[int, str]  # (kernel usec, stored text)


class StoredCopy(NamedTuple):
    id: int
    channels: int


def unkeyed_kernel_usec(line: WireLine) -> int | None:
    """The usec of a kernel record that came without its kseq (the journal's), else None."""
    if line.get("kseq") is not None or line["source"] != "kmsg":
        return None
    return kernel_usec(line.get("fields"))


def stored_copies(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    records: Sequence[RecordKey],
    since: float,
    until: float,
) -> list[StoredCopy | None]:
    """For each (usec, text), in order, the row another channel stored for that record.

    ``since``/``until``: the host-clock span of the records. Equal records pair up in kernel
    order, each copy used once.
    """
    if not records:
        return []
    wanted = set(records)
    rows = session.execute(
        select(Line.id, Line.text, Line.fields, Line.channels)
        .where(
            Line.host_id == host_id,
            Line.ts >= since - CLOCK_SKEW_S,
            Line.ts <= until + CLOCK_SKEW_S,
            Line.boot_pk == boot_pk,
            Line.kseq.is_not(None),
        )
        .order_by(Line.kseq)
        .limit(SCAN_LIMIT)
    )
    found: dict[RecordKey, list[StoredCopy]] = {}
    for line_id, text, fields, channels in rows:
        usec = kernel_usec(fields)
        if usec is not None and (usec, text) in wanted:
            found.setdefault((usec, text), []).append(StoredCopy(line_id, channels))
    return [found[key].pop(0) if found.get(key) else None for key in records]
