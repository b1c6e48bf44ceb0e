"""Guard fixtures: a synthetic /proc tree read by the agent's real sources, a stepped clock."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.guard.engine import Guard
from agent.guard.rules import parse_config
from agent.guard.rulesfile import parse_document
from agent.sources.proc import MemSource, PsiSource
from tests.agent.conftest import FIXTURES
from tests.support.docker_standin import DockerStandin

GIB = 1 << 30


class ProcTree:
    """A copy of the fixture /proc whose meminfo and memory pressure a test rewrites."""

    def __init__(self, root: Path) -> None:
        shutil.copytree(FIXTURES / "proc", root)
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


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Events:
    """Collects the guard's agent events."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.items.append((kind, data))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for k, d in self.items if k == kind]


def make_guard(text: str, *, events: Events, clock: Clock, runner: Any = None, **kw: Any) -> Guard:
    config = parse_config(parse_document(text), dry_run=kw.pop("dry_run", False))
    return Guard(config, on_event=events, runner=runner, mono=clock, wall=clock, **kw)


@pytest.fixture
def proc(tmp_path: Path) -> ProcTree:
    return ProcTree(tmp_path / "proc")


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[DockerStandin]:
    server = DockerStandin(str(tmp_path / "docker.sock"))
    yield server
    server.close()
