"""Data sources: sample sources (read once per tick) and line sources (blocking streams)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.config import AgentConfig
from agent.sources.base import LineSource, SampleSource
from agent.sources.kmsg import KmsgSource
from agent.sources.proc import proc_sources

OnEvent = Callable[[str, dict[str, Any]], None]

# Sections sampled at the burst rate: cheap procfs reads that show a sub-second memory dip.
FAST_SECTIONS = frozenset({"mem", "psi"})


class Sources:
    """What ``build_sources`` made of a config, plus the "off" notes to report once."""

    def __init__(
        self, samples: list[SampleSource] | None = None, lines: list[LineSource] | None = None
    ) -> None:
        self.samples: list[SampleSource] = samples or []
        self.lines: list[LineSource] = lines or []
        self.infos: list[tuple[str, str]] = []  # (source, info) → source_info

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.samples] + [s.name for s in self.lines]


def build_sources(
    config: AgentConfig,
    on_event: OnEvent | None = None,
    *,
    nvml: Any = None,
) -> Sources:
    """Every source the config asks for; ``on_event(kind, data)`` receives their agent events.

    ``nvml`` is handed to ``GpuSource.create`` (tests pass a double; production imports pynvml).
    """
    on_event = on_event or (lambda kind, data: None)
    out = Sources(samples=[*proc_sources(config.proc_root)], lines=[KmsgSource(config.kmsg)])
    _gpu(config, out, on_event, nvml)
    if config.vllm_url:
        from agent.sources.vllm_http import VllmHttpSource

        out.samples.append(VllmHttpSource(list(config.vllm_url)))
    _docker(config, out, on_event)
    if config.vllm_log:
        from agent.sources.logfollow import FileFollowSource

        out.lines += [FileFollowSource(str(path)) for path in config.vllm_log]
    if config.journal_unit:
        from agent.sources.logfollow import JournalUnitSource

        out.lines += [
            JournalUnitSource(unit, config.journalctl, on_event=on_event)
            for unit in config.journal_unit
        ]
    return out


def _gpu(config: AgentConfig, out: Sources, on_event: OnEvent, nvml: Any) -> None:
    if config.no_gpu:
        out.infos.append(("gpu", "GPU source off: --no-gpu"))
        return
    from agent.sources.gpu import GpuSource

    source, info = GpuSource.create(nvml)
    if source is None:
        out.infos.append(("gpu", info or "GPU source off"))
        return
    out.samples.append(source)
    out.lines.append(source.xid_source(on_event=on_event))


def _docker(config: AgentConfig, out: Sources, on_event: OnEvent) -> None:
    if not config.container_label and not config.container_name:
        out.infos.append(("containers", "Docker source off: no container label or name"))
        return
    from agent.sources.docker import DockerSource
    from agent.sources.docker_logs import DockerLogSource

    names, label = tuple(config.container_name), config.container_label
    source, info = DockerSource.create(config.docker_socket, names=names, label=label)
    if source is None:
        out.infos.append(("containers", info or "Docker source off"))
        return
    out.samples.append(source)
    out.lines.append(
        DockerLogSource(config.docker_socket, on_event=on_event, names=names, label=label)
    )
