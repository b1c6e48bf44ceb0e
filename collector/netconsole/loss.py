"""Transport-loss accounting from netconsole ``msgid`` (a per-target u32 counter, wraps)."""

from __future__ import annotations

_MOD = 1 << 32
_HALF = 1 << 31


class MsgidTracker:
    """Count msgid gaps for one (host, target); late arrivals within ``window`` undo a loss.

    A jump backwards to a msgid below ``window`` means the target was re-created (its
    counter restarts at 0): that starts a new run and counts as no loss. Anything else
    behind the expected msgid and not a known gap is a duplicate.
    """

    def __init__(self, window: int = 64) -> None:
        self.window = window
        self.received = 0  # distinct msgids seen
        self.lost = 0  # currently missing (net of late arrivals)
        self.duplicates = 0
        self.reordered = 0  # late arrivals that filled a gap
        self.restarts = 0
        self._next: int | None = None
        self._missing: set[int] = set()  # recent gaps a late datagram may still fill

    def observe(self, msgid: int) -> int:
        """Account one msgid; returns the change in ``lost`` (negative for a late arrival)."""
        msgid %= _MOD
        if self._next is None:
            return self._start(msgid)
        ahead = (msgid - self._next) % _MOD
        if ahead < _HALF:
            self.received += 1
            for i in range(max(0, ahead - self.window), ahead):
                self._missing.add((self._next + i) % _MOD)
            self._next = (msgid + 1) % _MOD
            if self._missing:
                self._trim()
            self.lost += ahead
            return ahead
        behind = _MOD - ahead  # 1 == the msgid just before next
        if msgid in self._missing:
            self._missing.discard(msgid)
            self.received += 1
            self.reordered += 1
            self.lost -= 1
            return -1
        if msgid < self.window and behind > self.window:
            self.restarts += 1  # a re-created target counts again from 0
            return self._start(msgid)
        self.duplicates += 1  # a repeat, or a straggler older than the window
        return 0

    def _start(self, msgid: int) -> int:
        self.received += 1
        self._next = (msgid + 1) % _MOD
        self._missing.clear()
        return 0

    def _trim(self) -> None:
        """Forget gaps older than the window: they are final losses now."""
        if self._next is None:
            return
        nxt = self._next
        self._missing = {m for m in self._missing if (nxt - m) % _MOD <= self.window}
