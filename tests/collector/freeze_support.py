"""Builders for freeze tests: batches posted through the real ingest API, a webhook receiver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from agent.wire import INGEST_PATH
from tests.collector.conftest import Collector
from tests.support.http_receiver import serve_posts

BOOT_A = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
BOOT_B = "0b3c9e11-2222-4d4e-9f8a-1b2c3d4e5f61"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def factory(c: Collector) -> sessionmaker[Session]:
    return c.client.app.state.sessionmaker  # type: ignore[attr-defined,no-any-return]


def sample(seq: int, ts: float, available: int = 40 * 2**30) -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": ts,
        "mem": {"MemTotal": 128 * 2**30, "MemAvailable": available},
        "psi": {"memory": {"some": {"avg10": 1.5}, "full": {"avg10": 0.25}}},
    }


def kline(seq: int, ts: float, text: str) -> dict[str, Any]:
    return {"seq": seq, "ts": ts, "source": "kmsg", "priority": 3, "kseq": seq, "text": text}


def post(
    c: Collector,
    token: str,
    host: str,
    *,
    boot: str = BOOT_A,
    samples: list[dict[str, Any]] | None = None,
    lines: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
    started_at: float = 1.0,
    sender_boot: str | None = None,
    backlog: int | None = None,
    sent_at: float | None = None,
) -> Any:
    """POST a batch; ``backlog`` (spool bytes left) and ``sent_at`` as newer agents send them."""
    agent: dict[str, Any] = {"version": "test", "pid": 1, "started_at": started_at}
    if sender_boot is not None:
        agent["boot_id"] = sender_boot
    if sent_at is not None:
        agent["sent_at"] = sent_at
    body = {
        "host": host,
        "boot_id": boot,
        "agent": agent,
        "samples": samples or [],
        "lines": lines or [],
        "events": events or [],
    }
    if backlog is not None:
        body["backlog"] = {"bytes": backlog}
    response = c.client.post(
        INGEST_PATH, content=json.dumps(body), headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    return response.json()


@dataclass
class Receiver:
    """A loopback webhook receiver that verifies every Standard Webhooks signature."""

    secret: str | None = SECRET
    statuses: list[int] = field(default_factory=list)  # answers to give, then 200
    received: list[dict[str, Any]] = field(default_factory=list)
    bad_signatures: int = 0
    url: str = ""
    event: threading.Event = field(default_factory=threading.Event)

    def handle(self, body: bytes, headers: dict[str, str]) -> int:
        status = self.statuses.pop(0) if self.statuses else 200
        if self.secret:
            try:
                Webhook(self.secret).verify(body, headers)
            except Exception:
                self.bad_signatures += 1
                return 400
        if status == 200:
            self.received.append(
                {"id": headers.get("webhook-id"), "body": json.loads(body), "headers": headers}
            )
            self.event.set()
        return status

    def ids(self) -> list[str]:
        return [r["id"] for r in self.received]

    def events(self) -> list[str]:
        return [r["body"].get("event", "slack") for r in self.received]


@contextmanager
def receiver(secret: str | None = SECRET, statuses: list[int] | None = None) -> Iterator[Receiver]:
    rec = Receiver(secret=secret, statuses=list(statuses or []))
    with serve_posts(lambda _path, headers, body: rec.handle(body, headers)) as port:
        rec.url = f"http://127.0.0.1:{port}/hook"
        yield rec
