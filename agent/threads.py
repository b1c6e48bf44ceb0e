"""What the agent's side threads run: a line source, the canary, the netconsole setup.

Each turns its own failure into a ``source_error`` event (a line source is restarted after
it): one failing source degrades to a reported error, never to a dead agent.
"""

from __future__ import annotations

import contextlib
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


def line_emitter(
    outbox: Outbox, observe: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[dict[str, Any]], None]:
    """What a line source emits into: lines (seen by ``observe`` first: burst triggers, the
    guard) and events (stamped now) into the outbox."""

    def emit(record: dict[str, Any]) -> None:
        if "kind" in record:
            outbox.put_event({"ts": round(time.time(), 6), **record})
            return
        if observe is not None:
            observe(record)
        outbox.put_line(record)

    return emit


def run_line_source(
    source: LineSource,
    outbox: Outbox,
    stop: threading.Event,
    observe: Callable[[dict[str, Any]], None] | None = None,
    *,
    reported: bool = False,
) -> None:
    """Run a line source until ``stop``; a crash is reported once, then it is restarted quietly.

    ``observe`` sees every emitted line first (burst triggers); ``reported``: its failure was
    reported already (it failed on the shipper's thread): it starts after a retry's wait.
    """
    emit = line_emitter(outbox, observe)
    if reported:
        stop.wait(LINE_SOURCE_RETRY)
    while not stop.is_set():
        try:
            source.run(emit, stop)
        except Exception as exc:
            if not reported:
                report_failure(source.name, exc, emit)
                reported = True
        stop.wait(LINE_SOURCE_RETRY)


def report_failure(name: str, exc: Exception, emit: Callable[[dict[str, Any]], None]) -> None:
    log.warning("line source %s failed: %s", name, exc)
    emit(
        {"kind": "source_error", "data": {"source": name, "error": f"{type(exc).__name__}: {exc}"}}
    )


def pump_line_source(
    source: LineSource,
    outbox: Outbox,
    stop: threading.Event,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[], None] | None:
    """Read ``source`` on the shipper's thread, woken by the same wait as the rest of its
    work, where the source can (/dev/kmsg: ``DevicePump``); returns how to stop that, or None
    when the source needs a thread of its own (``run_line_source``). Should the source fail
    there, it is reported and goes on in a thread of its own."""
    opener = getattr(source, "pump", None)
    if opener is None:
        return None
    emit = line_emitter(outbox, observe)
    try:
        pump = opener(emit)
    except OSError:
        return None  # the thread will try, and report what fails
    if pump is None:
        return None
    fd = pump.fileno()

    def drain() -> None:
        with contextlib.suppress(OSError):  # the next ``pump`` meets it again, and reports it
            pump.drain()

    def close() -> None:
        outbox.unwatch(fd)
        pump.close()

    def handler() -> bool:
        try:
            more: bool = pump.pump()
            return more
        except Exception as exc:
            close()
            report_failure(source.name, exc, emit)
            args = (source, outbox, stop, observe)
            kwargs = {"reported": True}
            threading.Thread(
                target=run_line_source, args=args, kwargs=kwargs, name=source.name, daemon=True
            ).start()
            return False

    outbox.watch(fd, handler, drain)
    return close


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
