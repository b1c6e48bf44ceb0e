"""Which stored line a netconsole record went into (merged with the agent's copy by (boot,
kseq), else found by its arrival): the line id the record's kernel event points at."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import KernelEvent
from collector.models import Host, Line
from collector.netconsole.records import ReceivedRecord


@dataclass(frozen=True)
class KernelHit:
    """A netconsole record that names a kernel event, before its line id is known."""

    host: Host
    boot_pk: int
    boot_id: str | None
    rec: ReceivedRecord
    event: KernelEvent


def stored_keyed_lines(
    session: Session, hits: list[KernelHit]
) -> dict[tuple[int, int], tuple[int, float]]:
    """(boot_pk, kseq) → (id, ts) of the rows these records went into, a few queries in all."""
    wanted: dict[int, set[int]] = {}
    for hit in hits:
        wanted.setdefault(hit.boot_pk, set()).add(int(hit.rec.record.kseq or 0))
    found: dict[tuple[int, int], tuple[int, float]] = {}
    for boot, kseqs in wanted.items():
        ordered = sorted(kseqs)
        for i in range(0, len(ordered), 500):
            rows = session.execute(
                select(Line.kseq, Line.id, Line.ts).where(
                    Line.boot_pk == boot, Line.kseq.in_(ordered[i : i + 500])
                )
            ).all()
            found.update(
                {(boot, kseq): (line_id, ts) for kseq, line_id, ts in rows if kseq is not None}
            )
    return found


def stored_line(session: Session, hit: KernelHit) -> tuple[int, float] | None:
    """(id, ts) of the row the record went into: by (boot, kseq), else by its arrival."""
    r = hit.rec.record
    query = select(Line.id, Line.ts).where(Line.boot_pk == hit.boot_pk)
    if r.kseq is not None:
        query = query.where(Line.kseq == r.kseq)
    else:
        query = query.where(
            Line.host_id == hit.host.id,
            Line.kseq.is_(None),
            Line.source == "netconsole",
            Line.received_at == hit.rec.received_at,
            Line.text == r.text,
        )
    row = session.execute(query.order_by(Line.id.desc()).limit(1)).first()
    return None if row is None else (row[0], row[1])
