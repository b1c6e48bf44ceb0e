"""Per-channel health of one host, computed on read from stored lines (survives restarts).

Canary lines are kernel lines whose text parses with ``parse_canary``; a row that both
channels brought counts once per channel, each with its own arrival time.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.canary import CANARY_PREFIX
from collector.models import CHANNEL_AGENT, CHANNEL_NETCONSOLE, Line, NetconsoleStats
from collector.netconsole.canary import CanaryStats, parse_canary

CANARY_WINDOW_S = 3600.0
# Channel names as the API shows them: the agent's kmsg reader, the kernel's netconsole.
CHANNELS = (("kmsg", CHANNEL_AGENT, "agent_received_at"),
            ("netconsole", CHANNEL_NETCONSOLE, "netconsole_received_at"))  # fmt: skip


def canary_report(
    session: Session,
    *,
    host_id: int,
    expect: tuple[str, ...] = ("kmsg",),
    now: float,
    window_s: float = CANARY_WINDOW_S,
) -> dict[str, dict[str, Any]]:
    """{channel: {p50_ms, p99_ms, lost, received}} over the canaries of the last ``window_s``.

    Lists the channels in ``expect`` and any that brought a canary; a channel that should
    carry canaries but brought none shows them all lost.
    """
    rows = session.execute(
        select(Line.text, Line.channels, Line.agent_received_at, Line.netconsole_received_at)
        .where(
            Line.host_id == host_id,
            Line.ts >= now - window_s,
            Line.kseq.is_not(None),
            Line.text.like(f"%{CANARY_PREFIX} %"),
        )
        .order_by(Line.ts)
    ).all()
    stats = CanaryStats()
    top: int | None = None
    for text, channels, agent_at, netconsole_at in rows:
        parsed = parse_canary(text)
        if parsed is None:
            continue
        n, sent = parsed
        if top is not None and n < top - stats.window:
            stats, top = CanaryStats(), None  # the counter restarted: report the newest run
        top = n if top is None else max(top, n)
        arrivals = {"kmsg": agent_at, "netconsole": netconsole_at}
        for name, bit, _column in CHANNELS:
            arrival = arrivals[name]
            if channels & bit and arrival is not None:
                stats.observe(name, n, sent, arrival)
    out: dict[str, dict[str, Any]] = {}
    for name, _bit, _column in CHANNELS:
        if name not in expect and name not in stats.channels():
            continue
        s = stats.summary(name)
        out[name] = {"p50_ms": s.p50_ms, "p99_ms": s.p99_ms, "lost": s.lost, "received": s.received}
    return out


def netconsole_report(session: Session, *, host_id: int) -> dict[str, Any]:
    """{received, lost_msgid, incomplete, last_line_at} from the receiver's per-host counters."""
    row = session.get(NetconsoleStats, host_id)
    if row is None:
        return {"received": 0, "lost_msgid": 0, "incomplete": 0, "last_line_at": None}
    return {
        "received": row.received,
        "lost_msgid": row.lost_msgid,
        "incomplete": row.incomplete,
        "last_line_at": row.last_line_at,
    }
