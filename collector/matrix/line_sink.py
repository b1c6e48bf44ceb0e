"""The matrix server's output into the store: buffered, written every ``flush_s`` by a thread.

Stored lines then go through the vLLM part of what ingest derives, with this server's own
parser (one sink per server start), so the run's starts, phases and startup plans are vLLM
starts of the host like those of the agent's log stream.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.ingest.derive import derive_from_vllm_lines
from collector.ingest.rows import LINE_COLUMNS, line_row
from collector.models import Line
from collector.schemas import truncate_line
from collector.vllm.log_parser import VllmLogParser
from collector.vllm.store import VllmStream, store_held_signals

log = logging.getLogger(__name__)


class LineSink:
    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        host_id: int,
        boot: int,
        tags: dict[str, Any],
        clock: Callable[[], float],
        flush_s: float = 0.5,
    ) -> None:
        self._factory = factory
        self._host_id = host_id
        self._boot = boot
        self._tags = tags
        self._clock = clock
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # the loop and close() never feed the parser twice
        self._stream = VllmStream(VllmLogParser())
        self._stop = threading.Event()
        self._flush_s = flush_s
        self._thread = threading.Thread(target=self._loop, name="matrix-lines", daemon=True)
        self._thread.start()

    def callback(self, stream: str) -> Callable[[str], None]:
        """A line callback for the server's ``stream`` (stdout/stderr)."""
        fields = {**self._tags, "stream": stream}

        def add(text: str) -> None:
            now = self._clock()
            text, truncated = truncate_line(text)
            row = line_row(
                (self._host_id, self._boot, now),
                seq=None,
                kseq=None,
                ts=now,
                source="vllm",
                priority=None,
                facility=None,
                text=text,
                truncated=truncated,
                fields=None,
            )
            # The ORM insert encodes the JSON column itself (and returns the ids in order).
            params = {**dict(zip(LINE_COLUMNS, row, strict=True)), "fields": fields}
            with self._lock:
                self._rows.append(params)

        return add

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                rows, self._rows = self._rows, []
            if not rows:
                return
            with session_scope(self._factory) as session:
                ids = session.scalars(
                    insert(Line).returning(Line.id, sort_by_parameter_order=True), rows
                ).all()
                stored = [(pk, row["ts"], row["text"]) for pk, row in zip(ids, rows, strict=True)]
                try:
                    with session.begin_nested():  # a parser failure never costs the lines
                        derive_from_vllm_lines(
                            session,
                            host_id=self._host_id,
                            boot_pk=self._boot,
                            stream=self._stream,
                            lines=stored,
                        )
                except Exception:
                    log.exception("vLLM telemetry of matrix server lines failed")
                    self._stream = VllmStream(VllmLogParser())  # ahead of the rollback

    def _loop(self) -> None:
        while not self._stop.wait(self._flush_s):
            try:
                self.flush()
            except Exception:
                log.exception("storing matrix server lines failed")

    def close(self) -> None:
        """Store what is buffered; the output ended, so the signals the parser still holds
        (from before any start) are hang signals now."""
        self._stop.set()
        self._thread.join()
        self.flush()
        with self._flush_lock, session_scope(self._factory) as session:
            store_held_signals(
                session, host_id=self._host_id, stream=self._stream, now=self._clock()
            )
