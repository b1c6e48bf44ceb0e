"""Hosts: registration, lookup by name or agent token, boots."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from collector.auth import hash_token, new_token
from collector.errors import Conflict, NotFound
from collector.models import AgentEvent, Boot, Host, Line, Sample, VllmStart
from collector.timeutil import utcnow


def create_host(
    session: Session, *, name: str, simulated: bool = False, netconsole_from: Sequence[str] = ()
) -> tuple[Host, str]:
    """Register a host; returns it with its agent token, which is shown only this once."""
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
    """The source addresses the host's kernel sends netconsole from (normalized by HostPatch
    at the edge: API body or CLI)."""
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


def rotate_token(session: Session, *, host: Host) -> str:
    token = new_token("fwh")
    host.token_hash = hash_token(token)
    session.flush()
    return token


def get_host(session: Session, *, name: str) -> Host:
    host = session.scalar(select(Host).where(Host.name == name))
    if host is None:
        raise NotFound(f"no host named {name!r}")
    return host


def host_for_token(session: Session, *, token: str) -> Host | None:
    return session.scalar(select(Host).where(Host.token_hash == hash_token(token)))


def list_hosts(session: Session) -> list[Host]:
    return list(session.scalars(select(Host).order_by(Host.name)))


def boot_pk(session: Session, *, host: Host, boot_id: str) -> int:
    """The row id of (host, boot_id), created on first sight (concurrent requests included)."""
    where = (Boot.host_id == host.id, Boot.boot_id == boot_id)
    pk = session.scalar(select(Boot.id).where(*where))
    if pk is None:
        insert = (
            postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
        )
        now = utcnow()
        session.execute(
            insert(Boot)
            .values(host_id=host.id, boot_id=boot_id, first_seen_at=now, last_seen_at=now)
            .on_conflict_do_nothing()
        )
        pk = session.scalar(select(Boot.id).where(*where))
    return pk


def latest_sample(session: Session, *, host: Host) -> Sample | None:
    return session.scalar(
        select(Sample).where(Sample.host_id == host.id).order_by(Sample.ts.desc()).limit(1)
    )


def latest_vllm_phase(session: Session, *, host: Host) -> str | None:
    """The phase of the host's latest vLLM server start (None before any)."""
    return session.scalar(
        select(VllmStart.phase)
        .where(VllmStart.host_id == host.id)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    )


def touch_boot(session: Session, *, pk: int) -> None:
    boot = session.get(Boot, pk)
    if boot is not None:
        boot.last_seen_at = utcnow()


def delete_host(session: Session, *, host: Host) -> None:
    """Remove a host and everything it sent (time-series tables carry no foreign keys)."""
    for model in (Sample, Line, AgentEvent):
        session.execute(delete(model).where(model.host_id == host.id))
    session.delete(host)
    session.flush()
