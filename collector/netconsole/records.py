"""What the receiver hands on: raw datagrams (stored before parsing), parsed records, counters."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from collector.netconsole.parse import NetconsoleRecord


class RawDatagram(NamedTuple):
    """One allowlisted datagram as received, before any parsing (a tuple: built per datagram)."""

    raw: bytes
    addr: tuple[str, int]
    received_at: float  # collector wall clock, epoch seconds
    host: str


IdRange = tuple[int, int]  # first and last id of persisted datagrams, inclusive
PersistRaw = Callable[[list[RawDatagram]], "IdRange | None"]
# (first, last, limit) -> (id, datagram); the datagram is None where its host was deleted since
LoadRaw = Callable[[int, int, int], list[tuple[int, RawDatagram | None]]]


@dataclass(frozen=True)
class ReceivedRecord:
    """A parsed (and, for fragments, reassembled) record with where and when it came."""

    host: str
    addr: tuple[str, int]
    received_at: float  # arrival of the first datagram of this record
    record: NetconsoleRecord


@dataclass
class ReceiverStats:
    rcvbuf_requested: int = 0
    rcvbuf_granted: int = 0  # as getsockopt reports it (Linux doubles the request)
    datagrams: int = 0  # allowlisted datagrams handed to persist_raw
    batches: int = 0
    records: int = 0
    unknown: Counter[str] = field(default_factory=Counter)  # dropped, per source address
    persist_errors: int = 0
    callback_errors: int = 0
    backlog: int = 0  # datagrams received but not parsed yet
    reloaded: int = 0  # datagrams the parse thread read back from storage (backlog overflow)
    unparsed: int = 0  # over the backlog with no raw copy to read back: never parsed
