"""One chat-completions request with a hard total deadline, abandoned on cancel or timeout."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Reply:
    status: int | None = None
    body: dict[str, Any] | None = None
    error: str | None = None
    timeout: bool = False
    cancelled: bool = False


def post_chat(
    client: httpx.Client,
    body: bytes,
    *,
    timeout_s: float,
    cancel: threading.Event,
    monotonic: Callable[[], float],
) -> Reply:
    """POST ``body``; gives up at ``timeout_s`` (an error) or when ``cancel`` is set."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["response"] = client.post(
                CHAT_PATH, content=body, headers={"Content-Type": "application/json"}
            )
        except Exception as exc:
            box["error"] = exc
        finally:
            done.set()

    # A daemon thread: a request into a frozen host may hang until httpx's own timeout.
    threading.Thread(target=work, daemon=True, name="tool-conv-request").start()
    deadline = monotonic() + timeout_s
    while not done.wait(min(0.05, max(0.0, deadline - monotonic()))):
        if cancel.is_set():
            return Reply(cancelled=True)
        if monotonic() >= deadline:
            return Reply(error="timeout", timeout=True)
    if "error" in box:
        exc = box["error"]
        timed_out = isinstance(exc, httpx.TimeoutException)
        return Reply(error=f"{type(exc).__name__}: {exc}", timeout=timed_out)
    response: httpx.Response = box["response"]
    if response.status_code // 100 != 2:
        return Reply(
            status=response.status_code,
            error=f"HTTP {response.status_code}: {response.text[:300]}",
        )
    try:
        parsed = response.json()
    except ValueError:
        return Reply(status=response.status_code, error="response body is not JSON")
    if not isinstance(parsed, dict):
        return Reply(status=response.status_code, error="response body is not an object")
    return Reply(status=response.status_code, body=parsed)
