"""One collector process: the app under uvicorn, on its own port or on a socket it is handed
(``collector.workers``)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sys
import threading
from types import FrameType
from typing import Protocol

import uvicorn

from collector import heap
from collector.main import WeakAdminToken, WorkerRole, create_app
from collector.settings import Settings

# A 1,000-line batch allocates tens of thousands of objects; at the default gen-0 threshold
# (700) that is dozens of collections per batch, and the older generations' passes walk the
# whole framework heap. Measured: validating a batch 2.7x slower, netconsole storms lossy.
GC_THRESHOLDS = (50_000, 20, 20)
TICK_TENTHS = 10  # uvicorn's main loop: a tick a second (its own: every tenth)


class Flag(Protocol):
    """What a server sets once it serves (``threading.Event`` or a multiprocessing one)."""

    def set(self) -> None: ...


def configure_logging() -> None:
    """The collector's log format; once per process (each worker is a process of its own)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Every scheduler tick at INFO would bury the decisions (host lost, alert sent).
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    # One line per matrix workload request would bury them too.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def tune_gc() -> None:
    """Freeze what startup allocated (never scanned again) and collect less often.

    Nearly all that ingest allocates is freed by reference counting; the few cycles
    (sessions, tracebacks) wait for the next, rarer collection.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def serve(
    settings: Settings,
    *,
    log_level: str = "info",
    sock: socket.socket | None = None,
    serving: Flag | None = None,
    worker: WorkerRole | None = None,
) -> int:
    """Run until a stop signal; 2 when the settings cannot start. ``sock``: listen there
    instead of binding ``settings.bind``; ``serving``: set once the app has started;
    ``worker``: this process is one of ``serve --workers``."""
    heap.tune()  # before the worker threads exist: they take their malloc arenas as they start
    try:
        app = create_app(settings, worker=worker)
    except WeakAdminToken as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tune_gc()
    config = uvicorn.Config(
        app,
        host=settings.bind,
        port=settings.port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    StoppingServer(config, app.state.stopping, serving).run(None if sock is None else [sock])
    return 0


class StoppingServer(uvicorn.Server):
    """uvicorn that tells the app the moment a stop signal arrives: from then on it takes no
    batch, so the checker must judge no silence (its jobs run until the lifespan ends, which
    is seconds later). Its main loop ticks once a second, not ten times (``main_loop``)."""

    def __init__(
        self, config: uvicorn.Config, stopping: threading.Event, serving: Flag | None = None
    ) -> None:
        super().__init__(config)
        self._stopping = stopping
        self._serving = serving
        self._ticks: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    async def main_loop(self) -> None:
        """uvicorn's own, at a tick a second: a tick refreshes the ``Date`` header (once a
        second in uvicorn too) and looks for a stop, and each of uvicorn's ten a second woke
        an idle collector's event loop, at a few hundred µs of CPU a wake-up on a VM. A stop
        signal ends the wait at once (``handle_exit``)."""
        tick = asyncio.Event()
        self._ticks = (asyncio.get_running_loop(), tick)
        counter = 0  # uvicorn's count of tenths of a second: its once-a-second work runs
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + TICK_TENTHS) % 864_000
            # asyncio's own: on 3.10 (the collector runs there too) not the builtin one
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(tick.wait(), TICK_TENTHS / 10)
            should_exit = await self.on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._serving is not None and not self.should_exit:
            self._serving.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._stopping.set()  # no logging here: a signal handler must not take locks
        super().handle_exit(sig, frame)
        if self._ticks is not None:
            loop, tick = self._ticks
            loop.call_soon_threadsafe(tick.set)
