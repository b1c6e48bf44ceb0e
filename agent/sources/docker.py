"""Containers through the Docker Engine API on its unix socket: state, restarts, OOM, memory."""

from __future__ import annotations

import json
import os
import urllib.parse
from typing import Any

from agent.config import DEFAULT_LABEL, DOCKER_SOCKET
from agent.unixhttp import UnixJsonClient

__all__ = ["DEFAULT_LABEL", "DOCKER_SOCKET", "DockerSource", "list_containers", "memory_used"]


def list_containers(
    client: UnixJsonClient, names: tuple[str, ...], label: str | None
) -> list[dict[str, Any]]:
    """Containers (running or not) chosen by exact name or by label, in API order, no repeats."""
    queries: list[dict[str, list[str]]] = []
    if label:
        queries.append({"label": [label]})
    if names:
        queries.append({"name": list(names)})
    found: dict[str, dict[str, Any]] = {}
    for filters in queries:
        query = urllib.parse.urlencode({"all": "1", "filters": json.dumps(filters)})
        for item in client.get_json(f"/containers/json?{query}"):
            item_names = [n.lstrip("/") for n in item.get("Names") or []]
            # The API's name filter matches substrings; keep exact names only.
            if "name" in filters and not set(item_names) & set(names):
                continue
            item["Name"] = item_names[0] if item_names else item["Id"][:12]
            found.setdefault(item["Id"], item)
    return list(found.values())


def memory_used(stats: dict[str, Any]) -> int | None:
    """Usage minus reclaimable file cache, as ``docker stats`` shows it (cgroup v1 and v2)."""
    memory = stats.get("memory_stats") or {}
    usage = memory.get("usage")
    if usage is None:
        return None
    detail = memory.get("stats") or {}
    for key in ("inactive_file", "total_inactive_file"):  # cgroup v2, then v1
        if key in detail and detail[key] < usage:
            return int(usage - detail[key])
    return int(usage)


class DockerSource:
    """SampleSource ``containers``: one entry per chosen container.

    ``{"id", "name", "image", "state", "restart_count", "oom_killed", "exit_code",
    "started_at", "mem_used", "mem_limit"}`` (bytes). Stats are the expensive call (the daemon
    reads cgroup files and may wait for a CPU sample), so they are refreshed every
    ``stats_every`` ticks and the last values are carried in between.
    """

    name = "containers"

    def __init__(
        self,
        socket_path: str = DOCKER_SOCKET,
        *,
        names: tuple[str, ...] = (),
        label: str | None = DEFAULT_LABEL,
        timeout: float = 0.5,
        stats_every: int = 5,
    ) -> None:
        self.client = UnixJsonClient(socket_path, timeout)
        self.names = names
        self.label = label
        self._stats_every = max(1, stats_every)
        self._tick = 0
        self._memory: dict[str, tuple[int | None, int | None]] = {}

    @classmethod
    def create(
        cls, socket_path: str = DOCKER_SOCKET, **kwargs: Any
    ) -> tuple[DockerSource | None, str | None]:
        """``(source, None)``, or ``(None, "Docker source off: ...")`` to report once."""
        if not os.path.exists(socket_path):
            return None, f"Docker source off: no socket at {socket_path}"
        return cls(socket_path, **kwargs), None

    def _entry(self, item: dict[str, Any], with_stats: bool) -> dict[str, Any]:
        cid = item["Id"]
        inspect = self.client.get_json(f"/containers/{cid}/json")
        state = inspect.get("State") or {}
        if with_stats and state.get("Running"):
            stats = self.client.get_json(f"/containers/{cid}/stats?stream=false&one-shot=true")
            limit = (stats.get("memory_stats") or {}).get("limit")
            self._memory[cid] = (memory_used(stats), limit)
        elif not state.get("Running"):
            self._memory.pop(cid, None)
        mem_used, mem_limit = self._memory.get(cid, (None, None))
        return {
            "id": cid[:12],
            "name": item["Name"],
            "image": item.get("Image"),
            "state": state.get("Status"),
            "restart_count": inspect.get("RestartCount"),
            "oom_killed": state.get("OOMKilled"),
            "exit_code": state.get("ExitCode"),
            "started_at": state.get("StartedAt"),
            "mem_used": mem_used,
            "mem_limit": mem_limit,
        }

    def read(self) -> list[dict[str, Any]]:
        with_stats = self._tick % self._stats_every == 0
        self._tick += 1
        items = list_containers(self.client, self.names, self.label)
        return [self._entry(item, with_stats) for item in items]

    def close(self) -> None:
        self.client.close()
