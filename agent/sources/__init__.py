"""Data sources: sample sources (read once per tick) and line sources (blocking streams)."""

from __future__ import annotations

from agent.config import AgentConfig
from agent.sources.base import LineSource, SampleSource
from agent.sources.kmsg import KmsgSource
from agent.sources.proc import proc_sources


def build_sources(config: AgentConfig) -> tuple[list[SampleSource], list[LineSource]]:
    """All sources this config asks for; later sources (gpu, vllm, journal) append here."""
    samples: list[SampleSource] = [*proc_sources(config.proc_root)]
    lines: list[LineSource] = [KmsgSource(config.kmsg)]
    return samples, lines
