"""The peers bench's figures: every run's value per key, printed as median (min to max) in a
table of freezewatch / peer / ratio rows, and summarised (medians) in the final JSON line."""

from __future__ import annotations

import math
import statistics
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Figures:
    values: dict[str, list[float]] = field(default_factory=dict)
    rows: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def ratio(self, key: str, fw: float, peer: float) -> None:
        """fw/peer, when both were measured."""
        if peer > 0 and not math.isnan(fw) and not math.isnan(peer):
            self.add(key, fw / peer)

    def pair(self, fw_key: str, fw: float, peer_key: str, peer: float, ratio_key: str) -> None:
        """One run's freezewatch and peer values, and their ratio fw/peer."""
        self.add(fw_key, fw)
        self.add(peer_key, peer)
        self.ratio(ratio_key, fw, peer)

    def row(self, label: str, fw_key: str, peer_key: str | None, ratio_key: str | None) -> None:
        self.rows.append((label, fw_key, peer_key, ratio_key))

    def skip(self, what: str, reason: str) -> None:
        self.skipped[what] = reason
        print(f"skipped {what}: {reason}", flush=True)

    @contextmanager
    def attempt(self, what: str) -> Iterator[None]:
        """One run: an error (a collector that never answered on a loaded machine) is recorded
        and printed, and the bench goes on with the next run."""
        try:
            yield
        except Exception as exc:
            self.failed[what] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{what} FAILED: {self.failed[what]}", flush=True)
            traceback.print_exc()

    def median(self, key: str) -> float | None:
        got = [v for v in self.values.get(key, []) if not math.isnan(v)]
        return round(statistics.median(got), 4) if got else None

    def spread(self, key: str | None) -> str:
        got = [v for v in self.values.get(key or "", []) if not math.isnan(v)]
        if not got:
            return "–"
        mid, lo, hi = statistics.median(got), min(got), max(got)
        if len(got) == 1:
            return _num(mid)
        return f"{_num(mid)} ({_num(lo)}–{_num(hi)})"

    def table(self) -> str:
        out = ["| figure | freezewatch | peer | ratio fw/peer |", "| --- | --- | --- | --- |"]
        for label, fw, peer, ratio in self.rows:
            if fw not in self.values and (peer or "") not in self.values:
                continue
            out.append(
                f"| {label} | {self.spread(fw)} | {self.spread(peer)} | {self.spread(ratio)} |"
            )
        return "\n".join(out)

    def summary(self, required: tuple[str, ...], **extra: object) -> dict[str, object]:
        """Medians of every key (``required`` ones present even when not measured: null)."""
        out: dict[str, object] = {key: None for key in required}
        out |= {key: self.median(key) for key in self.values}
        return {**out, **extra, "skipped": self.skipped, "failed": self.failed}


def _num(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"
