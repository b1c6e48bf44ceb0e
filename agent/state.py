"""Small durable agent state (boot id, kseq acked, seq high-water marks) in one JSON file."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from agent.wire import STREAMS

log = logging.getLogger(__name__)

SEQ_BLOCK = 100_000  # seqs reserved per state write: no disk write per record
# Canary numbers reserved per write: small, because a crash skips the rest of the block and the
# collector would count a large jump in n as canaries lost (10 min at the default 10 s).
CANARY_BLOCK = 60


def write_atomic(path: Path, data: bytes) -> None:
    """temp + fsync + rename + fsync(dir): after a crash the file is old or new, never torn."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class AgentState:
    """``state.json``: {host, boot_id, kseq_acked, kmsg_usec_acked, seq_reserved: {stream: n},
    canary_next}.

    ``kmsg_usec_acked`` is the kernel monotonic usec of record ``kseq_acked``: after a reboot
    the previous boot's journal (which has no kmsg seq) is caught up from that instant.

    Seq counters are monotonic per (host, boot) across restarts: a restart continues from the
    reserved high-water mark (skipping what the last run did not use), so only crossing a block
    of ``SEQ_BLOCK`` costs a write.
    """

    def __init__(self, state_dir: Path, host: str, boot_id: str) -> None:
        self.path = state_dir / "state.json"
        self.host = host
        self.boot_id = boot_id
        saved = self._load()
        same_boot = saved.get("host") == host and saved.get("boot_id") == boot_id
        self.previous_boot_id: str | None = saved.get("boot_id")
        self._lock = threading.Lock()  # shipper and canary threads both save
        self.kseq_acked: int | None = saved.get("kseq_acked") if same_boot else None
        self.kmsg_usec_acked: int | None = saved.get("kmsg_usec_acked") if same_boot else None
        # a crash lost the numbers handed out since the last save: start past the reservation
        self.canary_next = int(saved.get("canary_reserved", 1)) if same_boot else 1
        if same_boot and "canary_next" in saved and saved.get("canary_clean"):
            self.canary_next = int(saved["canary_next"])
        self._canary_reserved = self.canary_next + CANARY_BLOCK
        reserved = saved.get("seq_reserved", {}) if same_boot else {}
        self._next = {s: int(reserved.get(s, 1)) for s in STREAMS}
        self._reserved = dict(self._next)
        self._reserve_all()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
            return data if isinstance(data, dict) else {}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("state file %s unreadable (%s): starting fresh", self.path, exc)
            return {}

    def _reserve_all(self) -> None:
        for stream in STREAMS:
            self._reserved[stream] = self._next[stream] + SEQ_BLOCK
        self.save()

    def next_seq(self, stream: str) -> int:
        seq = self._next[stream]
        self._next[stream] = seq + 1
        if self._next[stream] >= self._reserved[stream]:
            self._reserved[stream] = self._next[stream] + SEQ_BLOCK
            self.save()
        return seq

    def note_canary(self, n: int) -> None:
        """Canary ``n`` was written; persist a new reservation when the block is used up."""
        self.canary_next = n + 1
        if self.canary_next >= self._canary_reserved:
            self._canary_reserved = self.canary_next + CANARY_BLOCK
            self.save()

    def save(self, *, clean: bool = False) -> None:
        """``clean``: a stop, not a crash: the next run continues canary n exactly."""
        with self._lock:
            data = {
                "host": self.host,
                "boot_id": self.boot_id,
                "kseq_acked": self.kseq_acked,
                "kmsg_usec_acked": self.kmsg_usec_acked,
                "seq_reserved": self._reserved,
                "canary_next": self.canary_next,
                "canary_reserved": self._canary_reserved,
                "canary_clean": clean,
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data, sort_keys=True).encode())
