"""The netconsole receiver's figures for the workers that do not run it (``serve --workers``).

One worker owns the UDP port; a request for ``GET /api/v1/netconsole`` or ``/metrics`` reaches
whichever worker the kernel gave the connection. The owner writes its figures to a file the
workers share once a second; the others answer from it, at most that much behind.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from collector.netconsole.channel import ChannelStatsOut, NetconsoleChannel
from collector.settings import Settings
from collector.trouble import Trouble

log = logging.getLogger(__name__)

FILE_NAME = "netconsole.json"
PUBLISH_S = 1.0


def open_netconsole(
    factory: sessionmaker[Session],
    *,
    settings: Settings,
    shared_dir: Path | None = None,
    owner: bool = True,
) -> tuple[ReceiverView | None, Publisher | None]:
    """netconsole as this process runs it (None when off) and the publisher to stop: the
    receiver, started, where this process owns the port (``owner``); elsewhere the figures the
    owner publishes in ``shared_dir``, the directory of ``serve --workers``."""
    if not settings.netconsole_bind:
        return None, None
    if not owner and shared_dir is not None:
        return PublishedReceiver(shared_dir / FILE_NAME), None
    channel = NetconsoleChannel(
        factory,
        bind=settings.netconsole_bind,
        keep_days=settings.netconsole_keep_days,
        fragment_timeout_s=settings.netconsole_fragment_timeout_s,
        settings=settings,
    )
    channel.start()
    if shared_dir is None:
        return channel, None
    publisher = Publisher(channel, shared_dir / FILE_NAME)
    publisher.start()
    return channel, publisher


class ReceiverView(Protocol):
    """What the routes need of the netconsole receiver, wherever it runs."""

    def stats(self) -> ChannelStatsOut: ...

    def allowlist_changed(self) -> None: ...


class Publisher:
    """Writes ``channel``'s figures to ``path`` every PUBLISH_S (atomically: a reader sees the
    last whole copy)."""

    def __init__(self, channel: ReceiverView, path: Path) -> None:
        self._channel, self._path = channel, path
        self._trouble = Trouble(
            log, "netconsole figures not published", "netconsole figures published again"
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="netconsole-publish", daemon=True)

    def start(self) -> None:
        self.publish()  # before the other workers start: they never find no file
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def publish(self) -> None:
        partial = self._path.with_suffix(".tmp")
        partial.write_text(self._channel.stats().model_dump_json())
        os.replace(partial, self._path)

    def _run(self) -> None:
        while not self._stop.wait(PUBLISH_S):
            try:
                self.publish()
            except OSError as exc:
                self._trouble.failed(exc)
            else:
                self._trouble.passed()


class PublishedReceiver:
    """The receiver of another worker, seen through its published figures."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._trouble = Trouble(
            log,
            "netconsole figures unreadable, reporting none",
            "netconsole figures readable again",
        )

    def stats(self) -> ChannelStatsOut:
        try:
            stats = ChannelStatsOut.model_validate_json(self._path.read_bytes())
        except (OSError, ValidationError) as exc:
            self._trouble.failed(exc)
            return NOTHING_YET
        self._trouble.passed()
        return stats

    def allowlist_changed(self) -> None:
        """Nothing to do here: the owner reloads its allowlist within its refresh (5 s)."""


# Every count 0 (a field added to the figures is zero here too), nothing listening.
NOTHING_YET = ChannelStatsOut.model_validate(
    {name: 0 for name, field in ChannelStatsOut.model_fields.items() if field.annotation is int}
    | {"listening": None, "rcvbuf": {"requested": 0, "granted": 0}, "unknown_senders": {}}
)
