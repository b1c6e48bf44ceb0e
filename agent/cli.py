"""``freezewatch-agent``: wire config, sources, shipper and signals together; run until SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.config import AgentConfig, parse_args
from agent.outbox import Outbox
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources import build_sources
from agent.sources.base import LineSource
from agent.sources.proc import UNKNOWN_BOOT_ID, read_boot_id
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Transport

log = logging.getLogger("agent")

LINE_SOURCE_RETRY = 5.0


def system_shutting_down(run_dir: Path = Path("/run/systemd")) -> bool:
    """Is the whole system going down (vs. only the agent being stopped)? Forks only at stop."""
    if (run_dir / "shutdown/scheduled").exists():
        return True
    try:
        out = subprocess.run(
            ["systemctl", "is-system-running"], capture_output=True, text=True, timeout=2
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out == "stopping"


def run_line_source(source: LineSource, outbox: Outbox, stop: threading.Event) -> None:
    """Run a line source until ``stop``; a crash is reported once, then it is restarted quietly."""
    reported = False

    def emit(record: dict[str, Any]) -> None:
        if "kind" in record:
            outbox.put_event({"ts": round(time.time(), 6), **record})
        else:
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


def run(
    config: AgentConfig,
    stop: threading.Event,
    *,
    outbox: Outbox | None = None,
    shutting_down: Callable[[], bool] = system_shutting_down,
) -> int:
    outbox = outbox or Outbox()
    sample_sources, line_sources = build_sources(config)
    try:
        boot_id = read_boot_id(config.proc_root)
        boot_error = None
    except OSError as exc:
        boot_id, boot_error = UNKNOWN_BOOT_ID, str(exc)
    state = AgentState(config.state_dir, config.host_name, boot_id)
    spool = Spool(config.state_dir / "spool", int(config.spool_max_mb * 1024 * 1024))
    transport = Transport(config.collector, config.token, timeout=config.timeout)
    shipper = Shipper(
        host=config.host_name,
        boot_id=boot_id,
        transport=transport,
        state=state,
        spool=spool,
        outbox=outbox,
        interval=config.interval,
    )
    log.info(
        "agent starting: host=%s boot=%s collector=%s", config.host_name, boot_id, config.collector
    )
    if boot_error:
        shipper.event("source_error", source="boot_id", error=boot_error)
    shipper.start()
    sampler = Sampler(sample_sources, outbox, interval=config.interval)
    threads = [threading.Thread(target=sampler.run, args=(stop,), name="sampler", daemon=True)]
    threads += [
        threading.Thread(
            target=run_line_source, args=(src, outbox, stop), name=src.name, daemon=True
        )
        for src in line_sources
    ]
    for thread in threads:
        thread.start()
    shipper.run(stop)
    shutdown = shutting_down()
    log.info("agent stopping (system shutdown: %s)", shutdown)
    shipper.finish(shutdown=shutdown)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = parse_args(argv, os.environ)
    stop = threading.Event()
    outbox = Outbox()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        outbox.wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return run(config, stop, outbox=outbox)
