"""Small durable agent state (boot id, kseq acked, seq high-water marks, drop ledger) in one
JSON file, kept writable on a full disk."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.diskio import save_small
from agent.drops import DropLedger
from agent.wire import STREAMS

log = logging.getLogger(__name__)

SEQ_BLOCK = 100_000  # seqs reserved per state write: no disk write per record
# Canary numbers reserved per write: small, because a crash skips the rest of the block and the
# collector would count a large jump in n as canaries lost (10 min at the default 10 s).
CANARY_BLOCK = 60


def clock_floor(wall: float) -> int:
    """A seq no earlier run can have reached: microseconds of wall time (no stream hands out a
    million records a second)."""
    return int(wall * 1_000_000)


class AgentState:
    """``state.json``: {host, boot_id, kseq_acked, kmsg_usec_acked, seq_reserved: {stream: n},
    canary_next, drops}.

    ``kmsg_usec_acked`` is the kernel monotonic usec of record ``kseq_acked``: after a reboot
    the previous boot's journal (which has no kmsg seq) is caught up from that instant.

    Seq counters are monotonic per (host, boot) across restarts: a restart continues from the
    reserved high-water mark (skipping what the last run did not use), so only crossing a block
    of ``SEQ_BLOCK`` costs a write. The file is padded, so on a full disk it is overwritten in
    place. Where even that fails (a full disk before the file ever existed), or the file is
    unreadable, a seq that could not be reserved on disk jumps to ``clock_floor``: a restart
    never hands out a seq twice (it may go back below the jump, never onto a used one).
    ``drops`` is the drop ledger (``agent.drops``); it outlives boots.
    """

    def __init__(
        self, state_dir: Path, host: str, boot_id: str, *, wall: Callable[[], float] = time.time
    ) -> None:
        self.path = state_dir / "state.json"
        self.host = host
        self.boot_id = boot_id
        self._wall = wall
        self._lock = threading.Lock()  # shipper and canary threads both save
        self.save_failed = False
        saved, unreadable = self._load()
        same_boot = saved.get("host") == host and saved.get("boot_id") == boot_id
        self.previous_boot_id: str | None = saved.get("boot_id")
        self.kseq_acked: int | None = saved.get("kseq_acked") if same_boot else None
        self.kmsg_usec_acked: int | None = saved.get("kmsg_usec_acked") if same_boot else None
        # a crash lost the numbers handed out since the last save: start past the reservation
        self.canary_next = int(saved.get("canary_reserved", 1)) if same_boot else 1
        if same_boot and "canary_next" in saved and saved.get("canary_clean"):
            self.canary_next = int(saved["canary_next"])
        self._canary_reserved = self.canary_next + CANARY_BLOCK
        self.drops = DropLedger.from_json(saved.get("drops") if saved.get("host") == host else None)
        reserved = saved.get("seq_reserved", {}) if same_boot else {}
        self._next = {s: int(reserved.get(s, 1)) for s in STREAMS}
        if unreadable:
            self._jump()
        self._reserved = {s: n + SEQ_BLOCK for s, n in self._next.items()}
        if not self.save():
            self._jump()

    def _load(self) -> tuple[dict[str, Any], bool]:
        """(saved state, whether a file was there but could not be read)."""
        try:
            data = json.loads(self.path.read_bytes())
            return (data, False) if isinstance(data, dict) else ({}, True)
        except FileNotFoundError:
            return {}, False
        except (OSError, ValueError) as exc:
            log.warning(
                "state file %s unreadable (%s): seqs continue from the clock", self.path, exc
            )
            return {}, True

    def _jump(self) -> None:
        """No reservation is on disk for what comes next: continue from the clock floor."""
        floor = clock_floor(self._wall())
        for stream in STREAMS:
            self._next[stream] = max(self._next[stream], floor)
        self._reserved = {s: n + SEQ_BLOCK for s, n in self._next.items()}

    def next_seq(self, stream: str) -> int:
        return self.next_seqs(stream, 1)

    def next_seqs(self, stream: str, n: int) -> int:
        """The first of ``n`` consecutive seqs of ``stream`` (n <= SEQ_BLOCK), handed out."""
        seq = self._next[stream]
        if seq + n > self._reserved[stream]:
            self._reserved[stream] = seq + n - 1 + SEQ_BLOCK
            if not self.save():
                self._jump()
                seq = self._next[stream]
        self._next[stream] = seq + n
        return seq

    def note_canary(self, n: int) -> None:
        """Canary ``n`` was written; persist a new reservation when the block is used up."""
        self.canary_next = n + 1
        if self.canary_next >= self._canary_reserved:
            self._canary_reserved = self.canary_next + CANARY_BLOCK
            self.save()

    def save(self, *, clean: bool = False) -> bool:
        """Persist; False (logged once per failing spell) when the disk refused even an
        overwrite in place. ``clean``: a stop, not a crash: the next run continues canary n
        exactly."""
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
                "drops": self.drops.to_json(),
            }
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                save_small(self.path, json.dumps(data, sort_keys=True).encode())
            except OSError as exc:
                if not self.save_failed:
                    log.warning("cannot save %s (%s): running on what is in memory", self.path, exc)
                self.save_failed = True
                return False
            if self.save_failed:
                log.info("state saved again")
            self.save_failed = False
            return True
