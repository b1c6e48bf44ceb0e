"""The netconsole channel as the app runs it: receiver + sender allowlist + store.

Started and stopped by the app's lifespan; routes reach it through ``deps``.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from collector.netconsole.allowlist import HostAllowlist
from collector.netconsole.reassembly import Reassembler
from collector.netconsole.receiver import DEFAULT_MAX_BACKLOG, DEFAULT_PORT, NetconsoleReceiver
from collector.netconsole.store import NetconsoleStore
from collector.schemas import OutModel
from collector.settings import Settings


class RcvbufOut(OutModel):
    """The socket receive buffer asked for and what the kernel granted (bytes)."""

    requested: int
    granted: int


class ChannelStatsOut(OutModel):
    """The receiver's own counters since the collector started; ``store_queue`` is datagrams
    received but not yet parsed and stored."""

    listening: str | None
    rcvbuf: RcvbufOut
    datagrams: int
    batches: int
    records: int
    unknown_senders: dict[str, int]
    unknown_datagrams: int
    persist_errors: int
    store_errors: int
    store_queue: int
    reloaded: int
    unparsed: int
    pending_fragments: int


def parse_bind(bind: str) -> tuple[str, int]:
    """``"0.0.0.0:6666"``, ``"[::]:6666"``, ``":6666"`` or ``"0.0.0.0"`` → (address, port)."""
    bind = bind.strip()
    if bind.startswith("["):
        addr, _, rest = bind[1:].partition("]")
        port = rest.lstrip(":")
    elif bind.count(":") == 1:
        addr, port = bind.split(":")
    else:
        addr, port = bind, ""
    return addr or "0.0.0.0", int(port) if port else DEFAULT_PORT


class NetconsoleChannel:
    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        bind: str,
        keep_days: float = 7.0,
        fragment_timeout_s: float = 2.0,
        allowlist_refresh_s: float = 5.0,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        settings: Settings | None = None,
    ) -> None:
        self.allowlist = HostAllowlist(factory, refresh_s=allowlist_refresh_s)
        self.store = NetconsoleStore(factory, keep_days=keep_days, settings=settings)
        self._reassembler = Reassembler(timeout_s=fragment_timeout_s)
        # The receive thread only drains the socket and stores raw datagrams; the receiver's
        # parse thread stores the lines, which may lag during a storm while the raw copy not.
        self.receiver = NetconsoleReceiver(
            parse_bind(bind),
            persist_raw=self.store.persist_raw,
            on_records=self.store.on_records,
            load_raw=self.store.load_raw,
            resolve_host=self.allowlist.resolve,
            reassembler=self._reassembler,
            tick_s=min(0.25, fragment_timeout_s / 2),
            max_backlog=max_backlog,
        )

    def start(self) -> None:
        self.allowlist.load()
        self.receiver.start()

    def stop(self) -> None:
        """Stop receiving, then parse and store the backlog (incl. pending fragments)."""
        self.receiver.stop()

    def allowlist_changed(self) -> None:
        """A host's ``netconsole_from`` changed: reload before the next datagram."""
        self.allowlist.invalidate()

    def stats(self) -> ChannelStatsOut:
        s = self.receiver.stats
        addr = self.receiver.address if self.receiver.running else None
        return ChannelStatsOut.model_validate(
            {
                "listening": f"{addr[0]}:{addr[1]}" if addr else None,
                "rcvbuf": {"requested": s.rcvbuf_requested, "granted": s.rcvbuf_granted},
                "datagrams": s.datagrams,
                "batches": s.batches,
                "records": s.records,
                "unknown_senders": dict(s.unknown),
                "unknown_datagrams": sum(s.unknown.values()),
                "persist_errors": s.persist_errors,
                "store_errors": s.callback_errors,
                "store_queue": s.backlog,
                "reloaded": s.reloaded,
                "unparsed": s.unparsed,
                "pending_fragments": self._reassembler.pending,
            }
        )
