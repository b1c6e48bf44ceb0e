"""Where each side's lines end up, read incrementally: rsyslog's output file, freezewatch's
``lines`` table (SQLite read-only, or PostgreSQL). ``poll()`` returns the texts stored since the
last call, so the bench sees each record once, whether it polls every millisecond or once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import make_url


class Sink(Protocol):
    def poll(self) -> list[str]: ...

    def close(self) -> None: ...


class FileSink:
    """Lines appended to a file (rsyslog's omfile output); an unfinished last line waits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._partial = b""

    def poll(self) -> list[str]:
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # noqa: SIM115 - kept open across polls
            except FileNotFoundError:
                return []
        data = self._partial + self._file.read()
        *lines, self._partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class DbSink:
    """New rows of freezewatch's ``lines`` table, by id; and the kernel losses the agent
    reported (``kmsg_overrun`` events)."""

    def __init__(self, db_url: str) -> None:
        url = make_url(db_url)
        self._last_id = 0
        if url.get_backend_name() == "sqlite":
            self._conn: Any = sqlite3.connect(f"file:{url.database}?mode=ro", uri=True)
            self._param = "?"
        else:
            import psycopg

            from tests.support.postgres import conninfo

            self._conn = psycopg.connect(**conninfo(db_url), autocommit=True)  # type: ignore[arg-type]
            self._param = "%s"

    def poll(self) -> list[str]:
        rows = self._conn.execute(
            f"SELECT id, text FROM lines WHERE id > {self._param} ORDER BY id", (self._last_id,)
        ).fetchall()
        if rows:
            self._last_id = rows[-1][0]
        return [text for _id, text in rows]

    def overrun_lost(self) -> int:
        """Records the agent says the kernel overwrote before it could read them."""
        rows = self._conn.execute(
            "SELECT data FROM agent_events WHERE kind = 'kmsg_overrun'"
        ).fetchall()
        return sum(
            int((json.loads(d) if isinstance(d, str) else d).get("lost", 0)) for (d,) in rows
        )

    def close(self) -> None:
        self._conn.close()
