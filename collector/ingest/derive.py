"""What a stored batch implies: kernel events, vLLM starts and phases, engine hangs.

Called by ``ingest_batch`` after the raw inserts, in the same transaction. Only kernel lines
(kmsg, netconsole, journal lines of the kernel transport, pstore files the agent ships after a
reboot) and ``source="vllm"`` lines are looked at, and a kernel line costs a few substring
tests unless it names an event; the ids of the stored lines are fetched only for the few lines
that say something.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import KernelEvent, classify_kernel_line
from collector import db
from collector.kernel.attribution import Site, attribute_reports, site_of
from collector.kernel.occurrences import DEFAULT_ESCALATE_AFTER
from collector.kernel.records import read_kernel_log
from collector.kernel.restated import NewRecord, fold_restatements, kernel_usec
from collector.kernel.store import NewKernelEvent, store_kernel_events
from collector.kernel.vllm_context import recorrelate_around
from collector.models import KERNEL_SOURCES, HostEvent, Line, VllmStart
from collector.schemas import Batch, WireLine, number
from collector.vllm.state import (
    HostVllmState,
    VllmStates,
    observe_samples,
    save_shared,
    sync_shared,
)
from collector.vllm.store import StoredLine, VllmStream, load_stream, store_vllm_lines


@dataclass
class Derived:
    """What one batch added: kernel events (alerting hooks on these) and host events."""

    kernel_events: list[NewKernelEvent] = field(default_factory=list)
    host_events: list[HostEvent] = field(default_factory=list)


def is_kernel_line(line: WireLine) -> bool:
    if line["source"] in KERNEL_SOURCES:
        return True
    return line["source"] == "journal" and (line.get("fields") or {}).get("_TRANSPORT") == "kernel"


def _line_no(line: WireLine) -> int:
    """A pstore line's place in its file; 0 when the agent sent no number there (``fields``
    is free-form JSON: a string or a list in it must not fail the batch)."""
    value = number((line.get("fields") or {}).get("line_no"))
    return 0 if value is None else int(value)


def pstore_events(files: dict[str, list[WireLine]]) -> list[tuple[WireLine, KernelEvent]]:
    """A previous boot's pstore files (the agent's catch-up) read whole, as ``inspect`` reads
    a saved log: an oops in them is one event, attributed to its module."""
    out = []
    for lines in files.values():
        lines.sort(key=_line_no)
        for found in read_kernel_log([ln["text"] for ln in lines]):
            out.append((lines[found.line_no - 1], found.event))
    return out


def derive_from_batch(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    batch: Batch,
    received_at: float,
    states: VllmStates | None = None,
    escalate_after: int = DEFAULT_ESCALATE_AFTER,
) -> Derived:
    """Classify, parse and correlate what ``batch`` stored (duplicates of earlier batches are
    skipped: only lines stored with this ``received_at`` count). ``states``: the process's vLLM
    state; without it, a host's state is rebuilt from storage. ``escalate_after``: reboots
    after which a recurring fatal fault says inspect_hardware."""
    classified: list[tuple[WireLine, KernelEvent]] = []
    vllm_lines: list[WireLine] = []
    sites: list[Site] = []
    pstore: dict[str, list[WireLine]] = {}
    for line in batch.lines:
        source, text = line["source"], line["text"]
        if source == "vllm":
            vllm_lines.append(line)
        elif source == "journal" and "pstore_file" in (fields := line.get("fields") or {}):
            pstore.setdefault(str(fields["pstore_file"]), []).append(line)
        elif is_kernel_line(line):
            event = classify_kernel_line(text)
            if event is not None:
                classified.append((line, event))
            elif "RIP: " in text or "pc : " in text:
                site = site_of(text)
                if site is not None:
                    sites.append((line["ts"], *site))
    whole = pstore_events(pstore)
    vllm_samples = [s for s in batch.samples if s.vllm]
    derived = Derived()
    if sites and not (classified or whole or vllm_lines or vllm_samples):
        attribute_reports(session, host_id=host_id, boot_pk=boot_pk, sites=sites)
        return derived
    if not (classified or whole or vllm_lines or vllm_samples):
        return derived
    states = states or VllmStates()
    state = states.host(host_id)
    with state.lock:
        try:
            shared = None
            if vllm_lines or vllm_samples:  # another replica may have moved it on
                shared = sync_shared(session, host_id=host_id, state=state)
            derived.host_events += _vllm(session, host_id, boot_pk, received_at, vllm_lines, state)
            derived.kernel_events = _kernel_events(
                session,
                host_id=host_id,
                boot_pk=boot_pk,
                received_at=received_at,
                hits=classified,
                whole=whole,
                escalate_after=escalate_after,
            )
            attribute_reports(session, host_id=host_id, boot_pk=boot_pk, sites=sites)
            if vllm_lines:
                recorrelate_around(
                    session,
                    host_id=host_id,
                    stamps=[ln["ts"] for ln in vllm_lines],
                    skip_ids={e.id for e in derived.kernel_events if e.id is not None},
                )
            derived.host_events += observe_samples(
                session,
                host_id=host_id,
                samples=vllm_samples,
                state=state,
                stall_s=states.hang_stall_s,
            )
            if shared is not None:
                save_shared(
                    session, shared, state, lines=bool(vllm_lines), samples=bool(vllm_samples)
                )
                # Not committed after all: the row stays at the version this copy came from.
                db.after_rollback(session, partial(states.forget, host_id))
        except BaseException:
            states.forget(host_id)  # in-memory parser state may be ahead of the rollback
            raise
    return derived


def stored_line_ids(
    session: Session, *, boot_pk: int, received_at: float, seqs: Sequence[int]
) -> dict[int, tuple[int, float]]:
    """seq → (id, ts) of the lines of ``seqs`` that this batch stored."""
    if not seqs:
        return {}
    wanted = set(seqs)
    rows = session.execute(
        select(Line.seq, Line.id, Line.ts).where(
            Line.boot_pk == boot_pk,
            Line.seq.between(min(seqs), max(seqs)),
            Line.received_at == received_at,
        )
    )
    return {seq: (line_id, ts) for seq, line_id, ts in rows if seq in wanted}


def _kernel_events(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    received_at: float,
    hits: Sequence[tuple[WireLine, KernelEvent]],
    whole: Sequence[tuple[WireLine, KernelEvent]] = (),
    escalate_after: int = DEFAULT_ESCALATE_AFTER,
) -> list[NewKernelEvent]:
    """The classified lines this batch stored (not its duplicates) as stored events, less the
    lines restating a report already counted (``restated``); ``whole``: events of files read
    whole (pstore), each report already counted once."""
    seqs = [ln["seq"] for ln, _ in (*hits, *whole)]
    ids = stored_line_ids(session, boot_pk=boot_pk, received_at=received_at, seqs=seqs)
    # None: a duplicate (replay, or the same record over another channel)
    new = [
        NewRecord(*found, line.get("kseq"), kernel_usec(line.get("fields")), line["text"], event)
        for line, event in hits
        if (found := ids.get(line["seq"])) is not None
    ]
    stored = fold_restatements(session, boot_pk=boot_pk, records=new)
    stored += [(*found, event) for line, event in whole if (found := ids.get(line["seq"]))]
    return store_kernel_events(
        session, host_id=host_id, boot_pk=boot_pk, hits=stored, escalate_after=escalate_after
    )


def _vllm(
    session: Session,
    host_id: int,
    boot_pk: int,
    received_at: float,
    lines: list[WireLine],
    state: HostVllmState,
) -> list[HostEvent]:
    if not lines:
        return []
    ids = stored_line_ids(
        session, boot_pk=boot_pk, received_at=received_at, seqs=[ln["seq"] for ln in lines]
    )
    ordered = sorted((ln for ln in lines if ln["seq"] in ids), key=lambda ln: (ln["ts"], ln["seq"]))
    if not ordered:
        return []
    stream = state.stream
    if stream is None or (
        stream.start_id is not None and session.get(VllmStart, stream.start_id) is None
    ):
        new_ids = {line_id for line_id, _ts in ids.values()}
        stream = state.stream = load_stream(session, host_id=host_id, exclude_ids=new_ids)
    stored = [(ids[ln["seq"]][0], ln["ts"], ln["text"]) for ln in ordered]
    events = store_vllm_lines(
        session, host_id=host_id, boot_pk=boot_pk, stream=stream, lines=stored
    )
    session.flush()
    return events


def derive_from_vllm_lines(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    stream: VllmStream,
    lines: list[StoredLine],
) -> list[HostEvent]:
    """The vLLM part for lines stored outside ingest (the matrix runner's server output):
    starts, phases and stats from ``stream``'s parser, then kernel events around the lines
    correlated again. ``lines`` are (id, ts, text) in ts order."""
    if not lines:
        return []
    events = store_vllm_lines(session, host_id=host_id, boot_pk=boot_pk, stream=stream, lines=lines)
    session.flush()
    recorrelate_around(session, host_id=host_id, stamps=[ts for _id, ts, _text in lines])
    return events
