"""Boot-aware catch-up: after a reboot, ship what the host kept of the previous boot.

A freeze ends in a power cycle; the agent's HTTP stream may have missed the last kernel lines.
At start, when the state dir says the previous boot X was shipped up to some point and the
current boot differs, the agent ships, tagged with ``boot_id = X``:

- X's kernel records from ``journalctl -b X -k -o json --no-pager`` (not following: with
  systemd >= 250 ``--follow`` implies the current boot only);
- new files in ``/sys/fs/pstore`` and ``/var/lib/systemd/pstore`` as ``source="journal"``
  lines, one per text line, ``fields={"pstore_file": name, "pstore_dir": dir, "line_no": n}``.

Dedup contract. journald does not store the kmsg seq, so journal records get no ``kseq``.
Instead the agent persists, next to ``kseq_acked``, the kernel monotonic usec of that record
(``kmsg_usec_acked``, flushed at most every 10 s while kernel lines flow, and at stop); only
journal records with ``_SOURCE_MONOTONIC_TIMESTAMP`` strictly after it are shipped (so up to
~10 s of lines before a crash are sent twice: once with kseq, once without; the collector
knows the second copy by its kernel usec and text, as it knows netconsole's). Each shipped
record gets a *stable* line seq: the previous boot's reserved seq high-water mark plus its
index in the journal's order, fixed in ``catchup.json`` before anything is sent. A catch-up
interrupted by a crash is redone with the same seqs and the collector's (host, boot, stream,
seq) key drops what it already has; once all is handed off (posted or spooled) the plan is
deleted and the pstore files are remembered, so a second start sends nothing.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agent.diskio import write_atomic

log = logging.getLogger(__name__)

PLAN_FILE = "catchup.json"
PSTORE_FILE = "pstore_shipped.json"
BATCH_LINES = 2000
PSTORE_MAX_BYTES = 1 << 20  # a pstore record is ~10 KiB; anything huge is cut, not loaded whole
UNKNOWN_BOOT = "unknown"

Deliver = Callable[[dict[str, Any]], None]


class CatchupPlan(NamedTuple):
    """The previous boot and where its shipping stopped; persisted before the first send."""

    host: str
    boot_id: str
    kseq_acked: int | None
    usec_acked: int | None
    line_seq: int  # first line seq to use: past anything boot X's agent handed out
    event_seq: int


class CatchupResult:
    """What a catch-up shipped (a plain class: see ``agent.config.AgentConfig``)."""

    def __init__(self, boot_id: str) -> None:
        self.boot_id = boot_id
        self.journal_lines = 0
        self.pstore_files = 0
        self.pstore_lines = 0
        self.error: str | None = None

    def summary(self) -> str:
        text = (
            f"previous boot {self.boot_id}: {self.journal_lines} kernel records from the "
            f"journal, {self.pstore_files} pstore files ({self.pstore_lines} lines)"
        )
        return text + (f"; journal failed: {self.error}" if self.error else "")


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def prepare(state_dir: Path, host: str, boot_id: str) -> CatchupPlan | None:
    """The catch-up owed at this start, persisted; call before ``AgentState`` rewrites state.

    An unfinished plan from an interrupted start wins over the state file.
    """
    plan_path = state_dir / PLAN_FILE
    existing = _load(plan_path)
    if isinstance(existing, dict):
        try:
            plan = CatchupPlan(**existing)
        except TypeError:
            plan = None
        if plan is not None and plan.host == host and plan.boot_id != boot_id:
            return plan
        plan_path.unlink(missing_ok=True)
    saved = _load(state_dir / "state.json")
    if not isinstance(saved, dict) or saved.get("host") != host:
        return None
    previous = saved.get("boot_id")
    if not isinstance(previous, str) or previous in (boot_id, UNKNOWN_BOOT):
        return None
    reserved = saved.get("seq_reserved") or {}
    plan = CatchupPlan(
        host=host,
        boot_id=previous,
        kseq_acked=saved.get("kseq_acked"),
        usec_acked=saved.get("kmsg_usec_acked"),
        line_seq=int(reserved.get("lines", 1)),
        event_seq=int(reserved.get("events", 1)),
    )
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(plan_path, json.dumps(plan._asdict(), sort_keys=True).encode())
    except OSError as exc:  # a full disk: catch up anyway (a rerun derives the same plan)
        log.warning("cannot save the catch-up plan (%s)", exc)
    return plan


def _boot_hex(boot_id: str) -> str:
    return boot_id.replace("-", "").lower()


def journal_kernel_line(entry: dict[str, Any], boot_id: str) -> tuple[int, dict[str, Any]] | None:
    """One ``journalctl -k -o json`` object of boot ``boot_id`` → (kernel usec, line dict)."""
    if "_BOOT_ID" in entry and _boot_hex(str(entry["_BOOT_ID"])) != _boot_hex(boot_id):
        return None
    try:
        recv_mono = int(entry["__MONOTONIC_TIMESTAMP"])
        usec = int(entry.get("_SOURCE_MONOTONIC_TIMESTAMP", recv_mono))
        realtime = int(entry["__REALTIME_TIMESTAMP"])
    except (KeyError, ValueError, TypeError):
        return None
    message = entry.get("MESSAGE")
    if isinstance(message, list):  # non-UTF-8 or non-printable: an array of byte values
        message = bytes(message).decode("utf-8", errors="replace")
    elif message is None:  # above journalctl's field size threshold
        message = ""
    fields: dict[str, str] = {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec), "via": "journal"}
    for key, name in (("_KERNEL_SUBSYSTEM", "SUBSYSTEM"), ("_KERNEL_DEVICE", "DEVICE")):
        if isinstance(entry.get(key), str):
            fields[name] = entry[key]
    priority, facility = entry.get("PRIORITY"), entry.get("SYSLOG_FACILITY")
    # the kernel's usec on the same wall mapping as kmsg lines: reception wall - reception mono
    ts = (realtime - recv_mono + usec) / 1e6
    return usec, {
        "ts": round(ts, 6),
        "source": "kmsg",
        "priority": int(str(priority)) if str(priority).isdigit() else None,
        "facility": int(str(facility)) if str(facility).isdigit() else 0,
        "text": str(message).rstrip("\n"),
        "fields": fields,
    }


def journal_lines(
    plan: CatchupPlan, journalctl: str, errors: list[str]
) -> Iterator[dict[str, Any]]:
    """The previous boot's kernel records after ``plan.usec_acked``, in journal order."""
    import subprocess  # here: only a start after a reboot runs journalctl (RSS)

    cmd = [journalctl, "-b", _boot_hex(plan.boot_id), "-k", "-o", "json", "--no-pager"]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        errors.append(f"cannot start {journalctl}: {exc}")
        return
    assert proc.stdout is not None and proc.stderr is not None
    try:
        for raw in proc.stdout:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # "-- No entries --" and the like
            mapped = journal_kernel_line(entry, plan.boot_id) if isinstance(entry, dict) else None
            if mapped is None:
                continue
            usec, line = mapped
            if plan.usec_acked is not None and usec <= plan.usec_acked:
                continue
            yield line
    finally:
        proc.stdout.close()
        stderr = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stderr.close()
        if proc.wait() != 0:
            errors.append(f"journalctl exited {proc.returncode}: {stderr[-300:]}")


def _pstore_files(dirs: Sequence[Path]) -> Iterator[tuple[Path, Path, str]]:
    """(dir, file, key) for every file under the pstore dirs, sorted; key: path:size."""
    for base in dirs:
        if not base.is_dir():
            continue
        for root, subdirs, files in os.walk(base):
            subdirs.sort()
            for name in sorted(files):
                path = Path(root) / name
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                yield base, path, f"{path}:{size}"


def pstore_seen(state_dir: Path) -> set[str] | None:
    data = _load(state_dir / PSTORE_FILE)
    return set(data) if isinstance(data, list) else None


def remember_pstore(state_dir: Path, keys: set[str]) -> None:
    """Remember the pstore files shipped; on a full disk they may be shipped again later
    (the collector's line keys drop the repeat)."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(state_dir / PSTORE_FILE, json.dumps(sorted(keys)).encode())
    except OSError as exc:
        log.warning("cannot save %s (%s)", PSTORE_FILE, exc)


def prime_pstore(state_dir: Path, dirs: Sequence[Path]) -> None:
    """First run ever (no previous boot known): files already there belong to no boot we know."""
    if pstore_seen(state_dir) is None:
        remember_pstore(state_dir, {key for _, _, key in _pstore_files(dirs)})


def pstore_lines(
    dirs: Sequence[Path], seen: set[str], new_keys: set[str]
) -> Iterator[dict[str, Any]]:
    """Lines of the pstore files not in ``seen``; their keys are added to ``new_keys``."""
    for base, path, key in _pstore_files(dirs):
        if key in seen:
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(PSTORE_MAX_BYTES)
            ts = path.stat().st_mtime
        except OSError as exc:
            log.warning("pstore file %s unreadable: %s", path, exc)
            continue
        new_keys.add(key)
        name = str(path.relative_to(base))
        text = data.decode("utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                fields = {"pstore_file": name, "pstore_dir": str(base), "line_no": n}
                yield {
                    "ts": round(ts, 6),
                    "source": "journal",
                    "priority": None,
                    "text": line,
                    "fields": fields,
                }


def run_catchup(
    plan: CatchupPlan,
    *,
    deliver: Deliver,
    agent_info: dict[str, Any],
    state_dir: Path,
    journalctl: str = "journalctl",
    pstore_dirs: Sequence[Path] = (),
    wall: Callable[[], float] = time.time,
) -> CatchupResult:
    """Ship the plan as batches of boot ``plan.boot_id`` through ``deliver``, then forget it."""
    result = CatchupResult(plan.boot_id)
    errors: list[str] = []
    seen = pstore_seen(state_dir) or set()
    new_keys: set[str] = set()
    seq = plan.line_seq
    chunk: list[dict[str, Any]] = []

    def flush(events: list[dict[str, Any]]) -> None:
        batch = {
            "host": plan.host,
            "boot_id": plan.boot_id,
            "agent": agent_info,
            "samples": [],
            "lines": list(chunk),
            "events": events,
        }
        chunk.clear()
        deliver(batch)

    for line in journal_lines(plan, journalctl, errors):
        chunk.append({"seq": seq, **line})
        seq += 1
        result.journal_lines += 1
        if len(chunk) >= BATCH_LINES:
            flush([])
    for line in pstore_lines(pstore_dirs, seen, new_keys):
        chunk.append({"seq": seq, **line})
        seq += 1
        result.pstore_lines += 1
        if len(chunk) >= BATCH_LINES:
            flush([])
    result.pstore_files = len(new_keys)
    result.error = "; ".join(errors) or None
    info = {"source": "catchup", "info": result.summary(), "after_kseq": plan.kseq_acked}
    event = {"seq": plan.event_seq, "ts": round(wall(), 6), "kind": "source_info", "data": info}
    flush([event])
    if new_keys:
        remember_pstore(state_dir, seen | new_keys)
    (state_dir / PLAN_FILE).unlink(missing_ok=True)
    return result
