"""After a ``rebooted`` resolution: fetch what the host kept of the previous boot, over SSH.

Each command's stdout/stderr/exit status/duration becomes an artifact of the incident. An SSH
failure (the host is still booting) puts the incident back in the queue for a later attempt, up
to ``postmortem_attempts``; a command that ran and failed is stored as it is. Never fatal.
The pstore files and the previous boot's kernel journal go through the kernel classifier, as a
live kernel line does: the artifact keeps the events found in it.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import changed_rows, read_scope, session_scope
from collector.kernel.records import log_event_dicts
from collector.models import Artifact, Host, Incident, PostmortemState
from collector.remote.connect import SSHTarget
from collector.remote.ssh import SSHClient
from collector.remote.targets import ssh_target
from collector.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "journal-kernel-prev-boot",
        ("journalctl", "-b", "-1", "-k", "-o", "short-monotonic", "--no-pager"),
    ),
    (
        "journal-warnings-prev-boot",
        ("journalctl", "-b", "-1", "-p", "warning..alert", "--no-pager"),
    ),
)
# Artifacts read as kernel logs (besides the pstore files), and how many events each keeps.
KERNEL_LOGS = ("journal-kernel-prev-boot",)
MAX_ARTIFACT_EVENTS = 500
NVIDIA_BUG_REPORT = (
    "nvidia-bug-report",
    (
        "sh",
        "-c",
        "nvidia-bug-report.sh --output-file /tmp/freezewatch-nbr.log >/dev/null 2>&1;"
        " s=$?; gzip -dc /tmp/freezewatch-nbr.log.gz; rm -f /tmp/freezewatch-nbr.log.gz; exit $s",
    ),
)


def commands(settings: Settings) -> list[tuple[str, list[str]]]:
    """The configured commands (or the defaults), without the pstore files."""
    if settings.postmortem_commands:
        out = [(c.name, list(c.argv)) for c in settings.postmortem_commands]
    else:
        out = [(name, list(argv)) for name, argv in DEFAULT_COMMANDS]
    if settings.postmortem_nvidia_bug_report:
        out.append((NVIDIA_BUG_REPORT[0], list(NVIDIA_BUG_REPORT[1])))
    return out


class Unreachable(Exception):
    """SSH itself failed: worth another try later."""


def _run(
    ssh: SSHClient, target: SSHTarget, argv: Sequence[str], settings: Settings
) -> dict[str, Any]:
    try:
        result = ssh.run(
            target,
            argv,
            timeout=settings.postmortem_timeout_s,
            connect_timeout=settings.postmortem_timeout_s,
            max_output=settings.postmortem_max_bytes,
        )
    except Exception as exc:
        raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
    cap = settings.postmortem_max_bytes
    return {
        "argv": list(argv),
        "stdout": result.stdout[-cap:],
        "stderr": result.stderr[-cap:],
        "exit_status": result.exit_status,
        "duration_s": round(result.duration_s, 4),
        "truncated": bool(result.truncated or len(result.stdout) > cap or len(result.stderr) > cap),
        "error": "timed out" if result.timed_out else None,
    }


def collect(
    target: SSHTarget, *, settings: Settings, ssh: SSHClient
) -> list[tuple[str, dict[str, Any]]]:
    """Run every command plus the pstore listing and files; raises Unreachable on SSH failure."""
    out = [(name, _run(ssh, target, argv, settings)) for name, argv in commands(settings)]
    listing = _run(
        ssh,
        target,
        ["find", settings.pstore_dir, "-maxdepth", "1", "-type", "f"],
        settings,
    )
    out.append(("pstore-list", listing))
    if listing["exit_status"] == 0:
        for path in sorted(listing["stdout"].decode(errors="replace").split()):
            out.append(
                (
                    f"pstore/{posixpath.basename(path)}",
                    _run(ssh, target, ["cat", path], settings),
                )
            )
    for name, result in out:
        if name in KERNEL_LOGS or name.startswith("pstore/"):
            text = result["stdout"].decode("utf-8", errors="replace")
            result["kernel_events"] = log_event_dicts(text.splitlines())[:MAX_ARTIFACT_EVENTS]
    return out


def collect_postmortems(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    ssh: SSHClient | None = None,
) -> list[int]:
    """One step: claim each due post-mortem, collect it, store artifacts; returns finished ids."""
    ssh = ssh or SSHClient()
    with read_scope(session_factory) as session:
        due = list(
            session.scalars(
                select(Incident.id).where(
                    Incident.postmortem_state == PostmortemState.PENDING,
                    Incident.postmortem_due_at <= now,
                )
            )
        )
    finished = []
    for incident_id in due:
        with session_scope(session_factory) as session:
            claimed = (
                changed_rows(
                    session,
                    update(Incident)
                    .where(
                        Incident.id == incident_id,
                        Incident.postmortem_state == PostmortemState.PENDING,
                    )
                    .values(
                        postmortem_state=PostmortemState.RUNNING,
                        postmortem_attempts=Incident.postmortem_attempts + 1,
                    )
                    .execution_options(synchronize_session=False),
                )
                == 1
            )
            if not claimed:
                continue
            incident = session.get(Incident, incident_id, populate_existing=True)
            assert incident is not None
            host = session.get(Host, incident.host_id)
            assert host is not None
            target, attempts = ssh_target(host), incident.postmortem_attempts
        if target is None:
            _finish(
                session_factory,
                incident_id,
                PostmortemState.FAILED,
                None,
                [],
                "no SSH configured",
                now,
            )
            continue
        try:
            results = collect(target, settings=settings, ssh=ssh)
        except Unreachable as exc:
            if attempts >= settings.postmortem_attempts:
                _finish(
                    session_factory, incident_id, PostmortemState.FAILED, None, [], str(exc), now
                )
            else:
                retry = now + timedelta(seconds=settings.postmortem_retry_s * attempts)
                _finish(
                    session_factory, incident_id, PostmortemState.PENDING, retry, [], str(exc), now
                )
            log.warning("post-mortem of incident %s, attempt %d: %s", incident_id, attempts, exc)
            continue
        _finish(session_factory, incident_id, PostmortemState.DONE, None, results, None, now)
        finished.append(incident_id)
        log.info("post-mortem of incident %s: %d artifacts", incident_id, len(results))
    return finished


def _finish(
    session_factory: sessionmaker[Session],
    incident_id: int,
    state: PostmortemState,
    due: datetime | None,
    results: list[tuple[str, dict[str, Any]]],
    error: str | None,
    now: datetime,
) -> None:
    with session_scope(session_factory) as session:
        incident = session.get(Incident, incident_id)
        if incident is None:
            return
        incident.postmortem_state = state
        incident.postmortem_due_at = due
        existing = {
            a.name: a
            for a in session.scalars(select(Artifact).where(Artifact.incident_id == incident_id))
        }
        if error is not None:
            row = existing.get("postmortem-error") or Artifact(
                incident_id=incident_id, name="postmortem-error", attempts=0
            )
            row.error, row.attempts, row.collected_at = error, row.attempts + 1, now
            session.add(row)
        for name, result in results:
            row = existing.get(name) or Artifact(incident_id=incident_id, name=name, attempts=0)
            for key, value in result.items():
                setattr(row, key, value)
            row.attempts = (row.attempts or 0) + 1
            row.collected_at = now
            session.add(row)
