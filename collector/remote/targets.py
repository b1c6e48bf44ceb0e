"""A host row as the SSH target the collector logs in to (its stored, pinned host key)."""

from __future__ import annotations

from collector.errors import BadRequest
from collector.models import Host
from collector.remote.connect import SSHTarget


def ssh_target(host: Host) -> SSHTarget | None:
    """The host's SSH target, or None when it has no SSH settings."""
    if not (host.ssh_user and host.ssh_host):
        return None
    return SSHTarget(
        user=host.ssh_user,
        host=host.ssh_host,
        port=host.ssh_port or 22,
        key_path=host.ssh_key_path,
        known_host_key=host.ssh_host_key,
    )


def require_ssh_target(host: Host) -> SSHTarget:
    target = ssh_target(host)
    if target is None:
        raise BadRequest(
            f"host {host.name!r} has no SSH settings: add them with "
            f"`freezewatch-collector add-host {host.name} --update --ssh USER@ADDR --key PATH "
            '--trust-host-key` or PATCH /api/v1/hosts/{name} {"ssh": ...}'
        )
    return target
