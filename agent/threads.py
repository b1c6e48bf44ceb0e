"""What the agent's side threads run: a line source, the canary, the netconsole setup.

Each turns its own failure into a ``source_error`` event (a line source is restarted after
it): one failing source degrades to a reported error, never to a dead agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from agent.canary import Canary
from agent.config import AgentConfig
from agent.outbox import Outbox
from agent.sources import OnEvent
from agent.sources.base import LineSource
from agent.state import AgentState

log = logging.getLogger("agent")  # the CLI's logger: these lines read as they did from there

LINE_SOURCE_RETRY = 5.0


def run_line_source(
    source: LineSource,
    outbox: Outbox,
    stop: threading.Event,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Run a line source until ``stop``; a crash is reported once, then it is restarted quietly.

    ``observe`` sees every emitted line first (burst triggers).
    """
    reported = False

    def emit(record: dict[str, Any]) -> None:
        if "kind" in record:
            outbox.put_event({"ts": round(time.time(), 6), **record})
            return
        if observe is not None:
            observe(record)
        outbox.put_line(record)

    while not stop.is_set():
        try:
            source.run(emit, stop)
        except Exception as exc:
            if not reported:
                log.warning("line source %s failed: %s", source.name, exc)
                error = f"{type(exc).__name__}: {exc}"
                emit({"kind": "source_error", "data": {"source": source.name, "error": error}})
                reported = True
        stop.wait(LINE_SOURCE_RETRY)


def run_canary(canary: Canary, state: AgentState, on_event: OnEvent, stop: threading.Event) -> None:
    """Write canaries until ``stop``; each number is noted in the state (it keeps rising)."""
    failing = False
    try:
        while not stop.is_set():
            n = canary.step()
            if n is not None:
                state.note_canary(n)
            if canary.last_error and not failing:
                on_event("source_error", {"source": "canary", "error": canary.last_error})
            failing = canary.last_error is not None
            stop.wait(min(1.0, canary.interval_s))
    finally:
        canary.close()


def setup_netconsole(
    config: AgentConfig, boot_id: str, on_event: OnEvent, setup: Callable[..., Any]
) -> Any:
    """Create the kernel netconsole target; the SetupReport becomes an info or error event."""
    assert config.netconsole is not None
    try:
        report = setup(
            config.netconsole,
            boot_id=boot_id,
            name=config.netconsole_name,
            sys_root=str(config.sys_root),
            proc_root=str(config.proc_root),
        )
    except Exception as exc:  # a bug or an odd host must not stop the agent
        log.warning("netconsole setup failed: %s", exc)
        on_event("source_error", {"source": "netconsole", "error": f"{type(exc).__name__}: {exc}"})
        return None
    summary = report.summary()
    if report.ok:
        log.info("%s", summary)
        on_event("source_info", {"source": "netconsole", "info": summary})
    else:
        log.warning("%s", summary)
        on_event("source_error", {"source": "netconsole", "error": summary})
    return report
