"""``serve``'s uvicorn: a main-loop tick a second, and a stop that does not wait for it."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
import uvicorn

from collector import serve
from collector.serve import StoppingServer
from tests.support.ports import free_port


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    return None


def started(
    monkeypatch: pytest.MonkeyPatch, tick_tenths: int
) -> tuple[StoppingServer, list[int], threading.Event, threading.Thread]:
    monkeypatch.setattr(serve, "TICK_TENTHS", tick_tenths)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), lifespan="off", log_level="warning"
    )
    stopping = threading.Event()
    server = StoppingServer(config, stopping)
    ticks: list[int] = []
    real_on_tick = server.on_tick

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        return await real_on_tick(counter)

    server.on_tick = on_tick  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    return server, ticks, stopping, thread


def test_each_tick_is_a_second_of_uvicorns_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn refreshes the Date header when its count of tenths is a multiple of ten: at a
    tick a second, every tick does."""
    server, ticks, stopping, thread = started(monkeypatch, serve.TICK_TENTHS)
    try:
        while len(ticks) < 3:
            assert thread.is_alive()
            time.sleep(0.05)
    finally:
        server.handle_exit(signal.SIGTERM, None)
        thread.join(30)
    assert ticks[:3] == [0, 10, 20] and stopping.is_set() and not thread.is_alive()


def test_a_stop_ends_the_wait_for_the_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the next tick an hour away, a stop still stops the server (without the wake the
    test would run into its timeout)."""
    server, ticks, stopping, thread = started(monkeypatch, 36_000)
    while not ticks:
        assert thread.is_alive()
        time.sleep(0.05)
    server.handle_exit(signal.SIGTERM, None)
    thread.join(60)
    assert not thread.is_alive() and stopping.is_set()
    assert ticks == [0, 36_000]  # woken, the tick saw the stop
