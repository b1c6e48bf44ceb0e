"""How the collector reaches a host on its own (SSH, vLLM URL) and maintenance pauses."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from collector.errors import BadRequest
from collector.incidents import lifecycle as incidents
from collector.models import Host
from collector.settings import Settings

log = logging.getLogger(__name__)

# (host, port, timeout) -> (key_line, fingerprint); collector.remote.ssh.fetch_host_key by default.
KeyFetcher = Callable[[str, int, float], tuple[str, str]]


def parse_ssh_spec(spec: str) -> tuple[str, str, int]:
    """``user@addr[:port]`` (``user@[v6addr]:port`` for IPv6) → (user, addr, port)."""
    user, sep, rest = spec.partition("@")
    if not sep or not user or not rest:
        raise BadRequest(f"ssh must look like user@host[:port], not {spec!r}")
    port = 22
    if rest.startswith("["):
        addr, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = int(tail[1:])
    elif rest.count(":") == 1:
        addr, _, port_text = rest.partition(":")
        port = int(port_text)
    else:
        addr = rest
    if not addr or not 0 < port < 65536:
        raise BadRequest(f"bad ssh address in {spec!r}")
    return user, addr, port


def _default_fetcher(host: str, port: int, timeout: float) -> tuple[str, str]:
    from collector.remote.ssh import fetch_host_key

    return fetch_host_key(host, port, timeout)


def configure_host(
    session: Session,
    *,
    host: Host,
    settings: Settings,
    now: datetime,
    ssh: str | None = None,
    key_path: str | None = None,
    host_key: str | None = None,
    trust_host_key: bool = False,
    vllm_url: str | None = None,
    grace_s: float | None = None,
    restart_agent: bool | None = None,
    paused: bool | None = None,
    fetch_key: KeyFetcher | None = None,
) -> dict[str, Any]:
    """Apply the given changes; returns facts worth telling the operator (fingerprint)."""
    facts: dict[str, Any] = {}
    if ssh is not None:
        user, addr, port = parse_ssh_spec(ssh)
        if (addr, port) != (host.ssh_host, host.ssh_port):
            host.ssh_host_key = None  # a new address needs its key trusted again
        host.ssh_user, host.ssh_host, host.ssh_port = user, addr, port
    if key_path is not None:
        host.ssh_key_path = key_path or None
    if host_key is not None:
        host.ssh_host_key = host_key or None
    if trust_host_key:
        if not host.ssh_host:
            raise BadRequest("--trust-host-key needs --ssh")
        try:
            line, fingerprint = (fetch_key or _default_fetcher)(host.ssh_host, host.ssh_port, 5.0)
        except Exception as exc:
            raise BadRequest(f"cannot fetch the host key of {host.ssh_host}: {exc}") from exc
        host.ssh_host_key = line
        facts["host_key_fingerprint"] = fingerprint
        log.warning("host %s: trusting host key %s on first use", host.name, fingerprint)
    if vllm_url is not None:
        host.vllm_url = vllm_url or None
    if grace_s is not None:
        if grace_s < 0:
            raise BadRequest("grace must be positive")
        host.grace_s = grace_s or None
    if restart_agent is not None:
        host.restart_agent = restart_agent
    if paused is not None and paused != host.paused:
        host.paused = paused
        if not paused and host.status == "paused":
            # Maintenance over but the host is still silent: watch it again from now.
            incident = incidents.open_incident_for(session, host_id=host.id)
            if incident is not None:
                incident.returned_at = None
                incidents.resolve(
                    session,
                    incident=incident,
                    host=host,
                    now=now,
                    settings=settings,
                    resolution="unpaused",
                )
            host.status, host.status_since = "unknown", now
            host.overdue_at = now + timedelta(seconds=host.grace_s or settings.grace_s)
    session.flush()
    return facts


def host_config_dict(host: Host) -> dict[str, Any]:
    return {
        "ssh": f"{host.ssh_user}@{host.ssh_host}:{host.ssh_port}" if host.ssh_host else None,
        "ssh_key_path": host.ssh_key_path,
        "ssh_host_key": host.ssh_host_key,
        "vllm_url": host.vllm_url,
        "grace_s": host.grace_s,
        "restart_agent": host.restart_agent,
        "paused": host.paused,
    }
