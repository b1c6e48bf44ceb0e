"""Per-channel health of one host, computed on read from stored lines (survives restarts).

Canary lines are kernel lines whose text parses with ``parse_canary``; a row that both
channels brought counts once per channel, each with its own arrival time.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.canary import CANARY_PREFIX
from collector.models import CHANNEL_AGENT, CHANNEL_NETCONSOLE, Line, NetconsoleStats
from collector.netconsole.canary import CanaryStats, parse_canary
from collector.schemas import OutModel

CANARY_WINDOW_S = 3600.0
# Channel names as the API shows them: the agent's kmsg reader, the kernel's netconsole.
CHANNELS = (("kmsg", CHANNEL_AGENT, "agent_received_at"),
            ("netconsole", CHANNEL_NETCONSOLE, "netconsole_received_at"))  # fmt: skip


class CanaryOut(OutModel):
    """One channel's canaries: delivery latency quantiles (ms), and how many were lost and
    received."""

    p50_ms: float | None
    p99_ms: float | None
    lost: int
    received: int


class NetconsoleHostOut(OutModel):
    """The receiver's counters for one host: records received, msgid gaps (net of late
    arrivals), fragments never completed, last line's arrival."""

    received: int
    lost_msgid: int
    incomplete: int
    last_line_at: float | None


def canary_report(
    session: Session,
    *,
    host_id: int,
    expect: tuple[str, ...] = ("kmsg",),
    now: float,
    window_s: float = CANARY_WINDOW_S,
) -> dict[str, CanaryOut]:
    """Each channel's canaries of the last ``window_s``, by channel name.

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
    return {
        name: CanaryOut.model_validate(stats.summary(name))
        for name, _bit, _column in CHANNELS
        if name in expect or name in stats.channels()
    }


def netconsole_report(session: Session, *, host_id: int) -> NetconsoleHostOut:
    """The receiver's per-host counters (zero before its first record)."""
    row = session.get(NetconsoleStats, host_id)
    if row is None:
        return NetconsoleHostOut(received=0, lost_msgid=0, incomplete=0, last_line_at=None)
    return NetconsoleHostOut.model_validate(row)
