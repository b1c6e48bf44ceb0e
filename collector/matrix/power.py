"""The host's power-cycle hook, for a host that does not come back by itself (a DGX Spark has
no BMC). It runs here, on the collector host, in a process group of its own, killed with it on
timeout; every use is recorded on the run (``events``) and on the incident (``power_cycles``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.hosts.config import PowerControl
from collector.matrix.store import record_event
from collector.models import Host, Incident

log = logging.getLogger(__name__)
OUTPUT_TAIL = 4000


def power_control(session: Session, *, host_id: int) -> PowerControl | None:
    """The host's hook, or None (none set, or one this version cannot read)."""
    host = session.get(Host, host_id)
    if host is None or not host.power:
        return None
    try:
        return PowerControl.model_validate(host.power)
    except ValidationError:
        log.warning("host %s: unreadable power setting %r ignored", host.name, host.power)
        return None


def run_hook(argv: list[str], timeout_s: float) -> dict[str, Any]:
    """Run the hook; its exit status (None when it could not run or timed out) and output."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return {"exit_status": None, "timed_out": False, "output_tail": str(exc)}
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return {
        "exit_status": None if timed_out else proc.returncode,
        "timed_out": timed_out,
        "duration_s": round(time.monotonic() - started, 3),
        "output_tail": out[-OUTPUT_TAIL:].decode("utf-8", "replace"),
    }


def power_cycle(
    factory: sessionmaker[Session],
    *,
    run_id: int,
    host_name: str,
    control: PowerControl,
    incident_id: int | None,
    away_s: float,
    clock: Callable[[], float],
) -> dict[str, Any]:
    """Power-cycle the host once and record it on the run and the incident."""
    log.warning(
        "matrix run %s: host %s away for %.0f s: power cycle %s",
        run_id,
        host_name,
        away_s,
        control.cycle,
    )
    entry = {
        "kind": "power_cycle",
        "at": clock(),
        "argv": list(control.cycle),
        "incident_id": incident_id,
        "away_s": round(away_s, 1),
        **run_hook(control.cycle, control.timeout_s),
    }
    with session_scope(factory) as session:
        record_event(session, run_id=run_id, event=entry)
        incident = session.get(Incident, incident_id) if incident_id is not None else None
        if incident is not None:
            incident.power_cycles = [*(incident.power_cycles or []), {**entry, "run_id": run_id}]
    return entry
