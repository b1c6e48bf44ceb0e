"""The lines that say a vLLM engine stopped making progress.

Hang signals ("No available shared memory broadcast block found", RPC timeouts, the Ray
executor's timeouts (RayChannelTimeoutError, GetTimeoutError), V0's engine iteration timeout,
torch's NCCL watchdog timing out a collective or finding itself stuck, the watchdog's stack
dumps, structured output's FSM failures) are facts of their own, reported with the phase the
server was in. They are evidence, not verdicts: an FSM failure alone is a structured-output
fault that users report next to requests still answered. The shared-memory line also prints
during a long compile or warmup, so it is quiet until the start is serving; so is Ray's
``GetTimeoutError``, which while a start is under way waits on that start (its placement group,
Ray Data's actors still loading), not on a step.
"""

from __future__ import annotations

from collector.vllm import log_formats as fmt


def hang_signal(msg: str, phase: str | None = None) -> str | None:
    """The name of the hang signal a message is, else None (cheap for ordinary lines).

    The shared-memory line and Ray's ``GetTimeoutError`` are no hang while the start is still
    compiling, loading or warming up, nor (the shared-memory line) after the server stopped
    (``phase``); the start's own outcome tells a stuck start."""
    for name, pattern, quiet_in in fmt.HANG_SIGNALS:
        if pattern.search(msg):
            return None if phase in quiet_in else name
    return None


def quiet_while_starting(msg: str) -> bool:
    """A hang signal no phase of a start under way makes a hang (the shared-memory line, Ray's
    ``GetTimeoutError``): before any start, what the capture shows next tells."""
    for _name, pattern, quiet_in in fmt.HANG_SIGNALS:
        if pattern.search(msg):
            return quiet_in >= fmt.STARTING
    return False
