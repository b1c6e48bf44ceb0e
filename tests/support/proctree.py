"""A synthetic /proc tree for the agent: the fixture tree copied, meminfo and memory pressure
rewritten by the test (or bench) while the agent's real sources read it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agent.sources.proc import MemSource, PsiSource

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "proc"
GIB = 1 << 30


class ProcTree:
    """A copy of the fixture /proc whose meminfo and memory pressure a test rewrites."""

    def __init__(self, root: Path) -> None:
        shutil.copytree(FIXTURE, root)
        self.root = root
        self.meminfo = (root / "meminfo").read_text()
        self.sources = [MemSource(root), PsiSource(root)]

    def set(
        self,
        *,
        available: float = 40 * GIB,
        swap_used: float = 0,
        psi_full: float = 0.0,
    ) -> None:
        swap_total = int(self.meminfo.split("SwapTotal:")[1].split()[0]) * 1024
        wanted = {"MemAvailable": available, "SwapFree": swap_total - swap_used}
        lines = []
        for line in self.meminfo.splitlines():
            key = line.split(":")[0]
            value = wanted.get(key)
            lines.append(line if value is None else f"{key}:  {int(value) // 1024} kB")
        (self.root / "meminfo").write_text("\n".join(lines) + "\n")
        (self.root / "pressure/memory").write_text(
            f"some avg10={psi_full:.2f} avg60=0.00 avg300=0.00 total=1\n"
            f"full avg10={psi_full:.2f} avg60=0.00 avg300=0.00 total=1\n"
        )

    def sample(self, ts: float) -> dict[str, Any]:
        return {"ts": ts, **{s.name: s.read() for s in self.sources}}
