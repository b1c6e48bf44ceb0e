"""The figures of a host command workload (a real agent framework's workflow on the host)."""

from __future__ import annotations

from typing import Any


def summarize_command_result(
    exit_status: int | None,
    duration: float,
    output: str | bytes,
    *,
    name: str = "command",
    timed_out: bool = False,
    cancelled: bool = False,
    tail_bytes: int = 8192,
    started_at: float | None = None,
    ended_at: float | None = None,
) -> dict[str, Any]:
    """Workload figures for a finished host command (exit_status None: killed, no status)."""
    raw = output.encode("utf-8", "replace") if isinstance(output, str) else output
    tail = raw[-tail_bytes:] if tail_bytes else b""
    if cancelled:
        outcome = "cancelled"
    elif timed_out:
        outcome = "timeout"
    elif exit_status == 0:
        outcome = "ok"
    else:
        outcome = "failed"
    return {
        "name": name,
        "kind": "command",
        "outcome": outcome,
        "started_at": started_at,
        "ended_at": ended_at,
        "exit_status": exit_status,
        "duration_s": round(duration, 3),
        "timed_out": timed_out,
        "output_bytes": len(raw),
        "output_tail": tail.decode("utf-8", "replace"),
    }
