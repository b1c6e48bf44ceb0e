"""Agent tokens this process has seen valid, by hash: a batch is authenticated without a query.

An entry only saves the lookup made before the body is read. Storing the batch checks the
token's hash against the host's row again, in the batch's own transaction (``ingest_batch``),
so a rotated token or a deleted host takes effect at once, whichever collector process made
the change: a stale entry costs one parsed body, then the request is refused and the entry
dropped. Only tokens that matched a host are kept, so an unknown client cannot fill it.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

MAX_ENTRIES = 10_000  # far above any fleet; a full cache starts over rather than grow


class TokenHost(NamedTuple):
    id: int
    name: str


class TokenCache:
    """token hash → the host it belonged to when last checked."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._hosts: dict[str, TokenHost] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, token_hash: str) -> TokenHost | None:
        return self._hosts.get(token_hash)

    def put(self, token_hash: str, host: TokenHost) -> None:
        with self._lock:
            if len(self._hosts) >= self._max:
                self._hosts.clear()
            self._hosts[token_hash] = host

    def forget(self, token_hash: str) -> None:
        with self._lock:
            self._hosts.pop(token_hash, None)
