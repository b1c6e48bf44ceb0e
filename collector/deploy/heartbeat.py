"""After a deploy: wait for the new agent's first batch and say what it runs and reads.

The agent's ``agent_started`` event, received after the deploy began (collector clock), marks
the new process; its first sample says which sections it samples, its ``source_info`` and
``source_error`` events say which sources are off and why.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.deploy.report import FirstBatch
from collector.hosts.registry import agent_outdated
from collector.models import AgentEvent, Host, Sample
from collector.timeutil import to_epoch

POLL_S = 0.5


def heartbeat_report(
    factory: sessionmaker[Session], *, host_id: int, since: float
) -> FirstBatch | None:
    """The new agent as the collector heard it since ``since``; None before its first batch.
    ``sampling`` is empty until its first sample arrived."""
    with session_scope(factory) as session:
        host = session.get(Host, host_id)
        events = list(
            session.scalars(
                select(AgentEvent)
                .where(AgentEvent.host_id == host_id, AgentEvent.received_at >= since)
                .order_by(AgentEvent.received_at, AgentEvent.id)
            )
        )
        if host is None or not any(e.kind == "agent_started" for e in events):
            return None
        sample = session.scalar(
            select(Sample)
            .where(Sample.host_id == host_id, Sample.received_at >= since)
            .order_by(Sample.received_at.desc())
            .limit(1)
        )
        return FirstBatch.model_validate({
            "agent_version": host.agent_version,
            "outdated": agent_outdated(host),
            "pid": host.agent_pid,
            "boot_id": host.current_boot_id,
            "heard_at": to_epoch(host.last_seen_at),
            "sampling": sorted(k for k, v in (sample.data if sample else {}).items()
                               if v and k not in ("seq", "ts")),
            "sources_off": [e.data for e in events if e.kind == "source_info"],
            "source_errors": [e.data for e in events if e.kind == "source_error"],
        })  # fmt: skip


def wait_for_heartbeat(
    factory: sessionmaker[Session],
    *,
    host_id: int,
    since: float,
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> FirstBatch | None:
    """``heartbeat_report`` once the agent's first sample is in (or at the timeout, whatever
    arrived by then); None when nothing did."""
    deadline = clock() + timeout_s
    while True:
        report = heartbeat_report(factory, host_id=host_id, since=since)
        if (report is not None and report.sampling) or clock() >= deadline:
            return report
        sleep(POLL_S)
