"""Which host a netconsole datagram belongs to: its sender address, from ``netconsole_from``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.hosts.config import normalize_addr
from collector.models import Host

log = logging.getLogger(__name__)


class HostAllowlist:
    """{sender IP: host id} from ``hosts.netconsole_from``; reloaded every ``refresh_s`` or on
    ``invalidate()`` (the hosts API calls it after a change)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._refresh_s = refresh_s
        self._clock = clock
        self._map: dict[str, int] = {}
        self._loaded_at: float | None = None
        self._lock = threading.Lock()

    def load(self) -> dict[str, int]:
        mapping: dict[str, int] = {}
        with db.session_scope(self._factory) as session:
            for host_id, addrs in session.execute(select(Host.id, Host.netconsole_from)):
                for addr in addrs or []:
                    try:
                        mapping[normalize_addr(addr)] = host_id
                    except ValueError:
                        log.warning("host %d: ignoring netconsole_from %r", host_id, addr)
        with self._lock:
            self._map = mapping
            self._loaded_at = self._clock()
        return mapping

    def invalidate(self) -> None:
        with self._lock:
            self._loaded_at = None

    def resolve(self, addr: str) -> str | None:
        """The receiver's ``resolve_host``: host id as text, or None to drop the datagram."""
        with self._lock:
            stale = self._loaded_at is None or self._clock() - self._loaded_at >= self._refresh_s
        mapping = self.load() if stale else self._map
        try:
            host_id = mapping.get(normalize_addr(addr))
        except ValueError:
            return None
        return None if host_id is None else str(host_id)
