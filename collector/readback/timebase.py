"""One time base for what the host views chart and filter: the collector's clock.

Records keep the agent's clock in ``ts``. Each batch measures the agent's offset (our receive
time minus its send time, ``liveness.heartbeat``); a host whose clock is off by ``SKEW_MIN_S``
or more has record times moved by that offset on the way out (the response models'
``schemas.AgentTime`` fields, validated with ``schemas.on_collector_clock``) and time filters
moved the other way on the way in (``to_agent``), so a host 2 h behind still shows its last
hour as the last hour. Below it the agent's clock is shown as is (that much is network delay
and jitter, not skew). One offset, the current one, applies to a host's whole history.
"""

from __future__ import annotations

from collector.models import Host

SKEW_MIN_S = 2.0


def offset_s(host: Host) -> float:
    """Seconds to add to the host's record times to get the collector's time base."""
    offset = host.clock_offset_s
    return offset if offset is not None and abs(offset) >= SKEW_MIN_S else 0.0


def to_agent(value: float | None, offset: float) -> float | None:
    """A time on the collector's base as the agent's clock read it (for filters)."""
    return None if value is None else value - offset
