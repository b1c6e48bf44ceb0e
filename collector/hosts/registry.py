"""Hosts: registration, lookup by name, agent tokens, boots, deletion; ``HostOut`` is how the
API shows one."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

import agent
from collector import db
from collector.auth import hash_token, new_token
from collector.errors import Conflict, NotFound
from collector.hosts.config import HostConfigOut
from collector.hosts.names import check_host_name
from collector.models import AgentEvent, Boot, Host, HostStatus, Line, Sample
from collector.schemas import OutModel
from collector.timeutil import to_epoch

# The boot of records from a host whose agent never reported one (netconsole only, a matrix
# run on a host without an agent).
UNKNOWN_BOOT = "unknown"


class AgentOut(OutModel):
    """The agent that sent the host's latest batch; ``outdated`` when its version differs from
    ``bundled_version``, this collector's (``freezewatch-collector deploy-agent NAME``
    upgrades)."""

    version: str | None
    pid: int | None
    started_at: float | None
    outdated: bool
    bundled_version: str


class HostOut(OutModel):
    """A host: liveness ``status`` since when, last heartbeat (``last_seen``), current boot,
    agent, labels, settings."""

    name: str
    status: HostStatus
    status_since: float
    last_seen: float | None
    boot_id: str | None
    agent: AgentOut
    simulated: bool
    paused: bool
    netconsole_from: list[str]
    labels: dict[str, str]
    config: HostConfigOut

    @classmethod
    def of(cls, host: Host) -> HostOut:
        return cls.model_validate(
            {
                "name": host.name,
                "status": host.status,
                "status_since": to_epoch(host.status_since),
                "last_seen": to_epoch(host.last_seen_at),
                "boot_id": host.current_boot_id,
                "agent": {
                    "version": host.agent_version,
                    "pid": host.agent_pid,
                    "started_at": host.agent_started_at,
                    "outdated": agent_outdated(host),
                    "bundled_version": agent.__version__,
                },
                "simulated": host.simulated,
                "paused": host.paused,
                "netconsole_from": list(host.netconsole_from or []),
                "labels": dict(host.labels or {}),
                "config": HostConfigOut.of(host),
            }
        )


def create_host(
    session: Session, *, name: str, simulated: bool = False, netconsole_from: Sequence[str] = ()
) -> tuple[Host, str]:
    """Register a host; returns it with its agent token, which is shown only this once."""
    check_host_name(name)
    if session.scalar(select(Host.id).where(Host.name == name)) is not None:
        raise Conflict(f"host {name!r} already exists")
    token = new_token("fwh")
    host = Host(name=name, token_hash=hash_token(token), simulated=simulated, netconsole_from=[])
    session.add(host)
    session.flush()
    if netconsole_from:
        set_netconsole_from(session, host=host, addrs=netconsole_from)
    return host, token


def set_netconsole_from(session: Session, *, host: Host, addrs: Sequence[str]) -> None:
    """The source addresses the host's kernel sends netconsole from (normalized at the edge:
    ``HostPatch`` for the API body and the CLI)."""
    _check_netconsole_free(session, host=host, addrs=list(addrs))
    host.netconsole_from = list(addrs)
    session.flush()


def _check_netconsole_free(session: Session, *, host: Host, addrs: list[str]) -> None:
    """A sender address maps to one host, or records would land on the wrong one."""
    for other_name, other_addrs in session.execute(
        select(Host.name, Host.netconsole_from).where(Host.id != host.id)
    ):
        taken = set(addrs) & set(other_addrs or [])
        if taken:
            addr = sorted(taken)[0]
            raise Conflict(f"netconsole address {addr} already belongs to {other_name!r}")


def rotate_token(session: Session, *, host: Host, token: str | None = None) -> str:
    """Give the host a new agent token (``token``, or a fresh one); the old one stops working."""
    token = token or new_token("fwh")
    host.token_hash = hash_token(token)
    session.flush()
    return token


def agent_outdated(host: Host) -> bool:
    """Whether the host's agent (as last heard) differs from the one this collector bundles."""
    return host.agent_version is not None and host.agent_version != agent.__version__


def get_host(session: Session, *, name: str) -> Host:
    host = session.scalar(select(Host).where(Host.name == name))
    if host is None:
        raise NotFound(f"no host named {name!r}")
    return host


def list_hosts(session: Session) -> list[Host]:
    return list(session.scalars(select(Host).order_by(Host.name)))


def count_by_status(session: Session) -> dict[str, int]:
    return {
        status: n
        for status, n in session.execute(select(Host.status, func.count()).group_by(Host.status))
    }


def find_boot_pk(session: Session, *, host_id: int, boot_id: str | None) -> int | None:
    """The row id of (host, boot_id) if that boot was ever seen."""
    if boot_id is None:
        return None
    return session.scalar(select(Boot.id).where(Boot.host_id == host_id, Boot.boot_id == boot_id))


def boot_pk(session: Session, *, host: Host, boot_id: str) -> int:
    """The row id of (host, boot_id), created on first sight (concurrent requests included).

    Rows are created in first-seen order, so a larger id is a boot seen later.
    """
    return ensure_boot_pk(session, host_id=host.id, boot_id=boot_id)


def ensure_boot_pk(session: Session, *, host_id: int, boot_id: str) -> int:
    """``boot_pk`` by the host's id."""
    pk = find_boot_pk(session, host_id=host_id, boot_id=boot_id)
    if pk is None:
        session.execute(
            db.insert(session, Boot)
            .values(host_id=host_id, boot_id=boot_id)
            .on_conflict_do_nothing()
        )
        pk = find_boot_pk(session, host_id=host_id, boot_id=boot_id)
    assert pk is not None
    return pk


def current_boot_pk(session: Session, *, host: Host) -> int:
    """The row id of the host's current boot (``UNKNOWN_BOOT`` before its agent said one)."""
    return boot_pk(session, host=host, boot_id=host.current_boot_id or UNKNOWN_BOOT)


def delete_host(session: Session, *, host: Host) -> None:
    """Remove a host and everything it sent (time-series tables carry no foreign keys)."""
    for model in (Sample, Line, AgentEvent):
        session.execute(delete(model).where(model.host_id == host.id))
    session.delete(host)
    session.flush()
