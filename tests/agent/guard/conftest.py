"""Guard fixtures: a synthetic /proc tree read by the agent's real sources, a stepped clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.guard.engine import Guard
from agent.guard.rules import parse_config
from agent.guard.rulesfile import parse_document
from tests.support.docker_standin import DockerStandin
from tests.support.proctree import ProcTree


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
