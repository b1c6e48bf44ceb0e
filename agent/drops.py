"""The drop ledger: every record the agent had to give up, counted in its state file, reported
to the collector as one cumulative ``spool_dropped`` event that is never spooled itself.

Totals only grow (per ledger id, which is new when the state file is), so a report that is
stored twice, or a second report after an answer that got lost, never double-counts: the
collector keeps the largest totals per ledger and takes losses as differences between them.
"""

from __future__ import annotations

import os
from typing import Any

from agent.frames import DROP_KEYS


def _zero() -> dict[str, int]:
    return dict.fromkeys(DROP_KEYS, 0)


class DropLedger:
    def __init__(
        self,
        ledger: str | None = None,
        totals: dict[str, int] | None = None,
        reported: dict[str, int] | None = None,
        first_ts: float | None = None,
        last_ts: float | None = None,
        reasons: list[str] | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else os.urandom(8).hex()
        self.totals = totals if totals is not None else _zero()
        self.reported = reported if reported is not None else _zero()
        # the drops not yet reported: when they happened and why
        self.first_ts = first_ts
        self.last_ts = last_ts
        self.reasons = reasons if reasons is not None else []

    @classmethod
    def from_json(cls, data: Any) -> DropLedger:
        if not isinstance(data, dict) or not isinstance(data.get("ledger"), str):
            return cls()
        try:
            return cls(
                ledger=data["ledger"],
                totals={k: int(data.get("totals", {}).get(k, 0)) for k in DROP_KEYS},
                reported={k: int(data.get("reported", {}).get(k, 0)) for k in DROP_KEYS},
                first_ts=data.get("first_ts"),
                last_ts=data.get("last_ts"),
                reasons=[str(r) for r in data.get("reasons", [])],
            )
        except (TypeError, ValueError, AttributeError):
            return cls()

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "totals": self.totals,
            "reported": self.reported,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "reasons": self.reasons,
        }

    def add(self, counts: dict[str, int], reasons: list[str], ts: float) -> bool:
        """Count a drop; False if ``counts`` held nothing."""
        if not any(counts.get(k, 0) for k in DROP_KEYS):
            return False
        for key in DROP_KEYS:
            self.totals[key] += counts.get(key, 0)
        self.first_ts = ts if self.first_ts is None else self.first_ts
        self.last_ts = ts
        self.reasons = sorted({*self.reasons, *reasons})
        return True

    def pending(self) -> bool:
        return self.totals != self.reported

    def report(self) -> dict[str, Any]:
        """The ``spool_dropped`` event data: totals so far and the window of the new drops."""
        return {
            "ledger": self.ledger,
            **self.totals,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "reasons": list(self.reasons),
        }

    def acknowledge(self, report: dict[str, Any]) -> None:
        """The collector stored ``report``: what it covered is reported."""
        self.reported = {k: int(report[k]) for k in DROP_KEYS}
        if not self.pending():
            self.first_ts = self.last_ts = None
            self.reasons = []
