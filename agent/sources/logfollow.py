"""vLLM logs outside Docker: a followed log file (tail -F) or a systemd unit's journal."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from agent.inotify import ChangeWaiter, make_file_waiter
from agent.sources.lines import level_priority, make_line
from agent.wire import MAX_LINE_BYTES

Emit = Callable[[dict[str, Any]], None]
OnEvent = Callable[[str, dict[str, Any]], None]


def _split(buffer: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines out of ``buffer + chunk``; an over-long partial line is cut, not held."""
    buffer += chunk
    *lines, rest = buffer.split(b"\n")
    if len(rest) > MAX_LINE_BYTES:
        lines.append(rest)
        rest = b""
    return lines, rest


class FileFollowSource:
    """LineSource ``vllm_log``: follows PATH like ``tail -F`` from its end.

    Handles rotation (rename + new file: the old file is drained first), truncation (copytruncate)
    and a file that does not exist yet. Wakes on inotify events of the file and of its name in
    the directory (``waiter_factory(path)``), else polls.
    """

    def __init__(
        self,
        path: str,
        *,
        source: str = "vllm",
        clock: Callable[[], float] = time.time,
        waiter_factory: Callable[[str], ChangeWaiter] = make_file_waiter,
        start_at_end: bool = True,
        wait_s: float = 0.5,
    ) -> None:
        self.name = "vllm_log"
        self.path = path
        self._source = source
        self._clock = clock
        self._waiter_factory = waiter_factory
        self._start_at_end = start_at_end
        self._wait_s = wait_s
        self.ready = threading.Event()  # set once the start position is taken

    def _open(self, at_end: bool) -> Any | None:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - kept open across loop iterations
        except OSError:
            return None
        if at_end:
            f.seek(0, os.SEEK_END)
        return f

    def _emit(self, emit: Emit, raw: bytes) -> None:
        text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
        if text:
            emit(
                make_line(
                    self._clock(), self._source, text, {"file": self.path}, level_priority(text)
                )
            )

    def _drain(self, f: Any, buffer: bytes, emit: Emit) -> bytes:
        while chunk := f.read(65536):
            lines, buffer = _split(buffer, chunk)
            for raw in lines:
                self._emit(emit, raw)
        return buffer

    def _replaced(self, f: Any) -> bool:
        """True when PATH now names another file (rotated) or none."""
        try:
            return os.stat(self.path).st_ino != os.fstat(f.fileno()).st_ino
        except OSError:
            return True

    def run(self, emit: Emit, stop: threading.Event) -> None:
        waiter = self._waiter_factory(self.path)
        f = self._open(at_end=self._start_at_end)
        waiter.rewatch()
        self.ready.set()
        buffer = b""
        try:
            while not stop.is_set():
                if f is None:
                    f = self._open(at_end=False)  # appeared after we started: read it whole
                    if f is not None:
                        waiter.rewatch()
                if f is not None:
                    if os.fstat(f.fileno()).st_size < f.tell():  # truncated in place
                        f.seek(0)
                        buffer = b""
                    buffer = self._drain(f, buffer, emit)
                    if self._replaced(f):
                        buffer = self._drain(f, buffer, emit)  # lines written before the rename
                        if buffer:
                            self._emit(emit, buffer)
                            buffer = b""
                        f.close()
                        f = self._open(at_end=False)
                        waiter.rewatch()
                        continue
                waiter.wait(self._wait_s)
        finally:
            waiter.close()
            if f is not None:
                f.close()


def journal_line(entry: dict[str, Any], source: str, unit: str) -> dict[str, Any] | None:
    """One ``journalctl -o json`` object → a line dict (None for an entry without time)."""
    message = entry.get("MESSAGE")
    if isinstance(message, list):  # non-UTF-8 or non-printable: an array of byte values
        message = bytes(message).decode("utf-8", errors="replace")
    elif message is None:  # above journalctl's field size threshold
        message = ""
    try:
        ts = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    except (KeyError, ValueError, TypeError):
        return None
    priority = entry.get("PRIORITY")
    fields = {"unit": unit}
    for key, name in (("_PID", "pid"), ("SYSLOG_IDENTIFIER", "identifier")):
        if isinstance(entry.get(key), str):
            fields[name] = entry[key]
    return make_line(
        ts,
        source,
        str(message).rstrip("\n"),
        fields,
        int(priority) if isinstance(priority, str) and priority.isdigit() else None,
    )


class JournalUnitSource:
    """LineSource ``journal_unit``: one long-lived ``journalctl -f -o json -u UNIT``.

    Starts at the journal's end (``-n 0``); when journalctl dies it is restarted with backoff
    from the last cursor seen (``--after-cursor``), so nothing between is lost.
    """

    def __init__(
        self,
        unit: str,
        journalctl: str = "journalctl",
        *,
        source: str = "vllm",
        on_event: OnEvent | None = None,
        backoff: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0),
        healthy_after_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = "journal_unit"
        self.unit = unit
        self._journalctl = journalctl
        self._source = source
        self._on_event = on_event or (lambda kind, data: None)
        self._backoff = backoff
        self._healthy_after_s = healthy_after_s
        self._monotonic = monotonic
        self.cursor: str | None = None

    def command(self) -> list[str]:
        where = [f"--after-cursor={self.cursor}"] if self.cursor else ["-n", "0"]
        return [self._journalctl, "-f", "-o", "json", "--no-pager", "-u", self.unit, *where]

    def _follow(self, proc: subprocess.Popen[bytes], emit: Emit, stop: threading.Event) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not stop.is_set():
                if not selector.select(0.5):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return  # journalctl exited
                lines, buffer = _split(buffer, chunk)
                for raw in lines:
                    self._handle(raw, emit)

    def _handle(self, raw: bytes, emit: Emit) -> None:
        try:
            entry = json.loads(raw)
        except ValueError:
            return  # a stray non-JSON line (e.g. "-- No entries --") is not a record
        if not isinstance(entry, dict):
            return
        if isinstance(entry.get("__CURSOR"), str):
            self.cursor = entry["__CURSOR"]
        line = journal_line(entry, self._source, self.unit)
        if line is not None:
            emit(line)

    def run(self, emit: Emit, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            started = self._monotonic()
            try:
                proc = subprocess.Popen(
                    self.command(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
                )
            except OSError as exc:
                error = f"cannot start {self._journalctl}: {exc}"
            else:
                try:
                    self._follow(proc, emit, stop)
                finally:
                    proc.terminate()
                    try:
                        code = proc.wait(timeout=2.0)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        code = proc.wait()
                    if proc.stdout is not None:
                        proc.stdout.close()
                error = f"journalctl exited with status {code}"
            if stop.is_set():
                return
            if self._monotonic() - started >= self._healthy_after_s:
                failures = 0
            if failures == 0:  # one report per outage, then quiet retries
                self._on_event("source_error", {"source": self.name, "error": error})
            delay = self._backoff[min(failures, len(self._backoff) - 1)]
            failures += 1
            stop.wait(delay)
