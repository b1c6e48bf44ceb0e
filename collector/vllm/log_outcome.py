"""How a vLLM server start ended.

- ``failed``: the start died before serving: a root cause (in any spelling vLLM used), the
  engine's generic failure lines, the engine never starting in time, a traceback in the API
  server ending in an exception, or the engine's own dying traceback (logged by its core.py)
  while the start was under way, even without its header line; or the shell's "Killed" (the
  process SIGKILLed, which crashes a server that was serving) where it comes from the stream
  vLLM's own lines come from (a compose stream or a journal interleaves other processes').
  Not a traceback Python reports it ignored ("Exception ignored in: ...", a destructor's at exit).
  A process death ("Worker proc ... died unexpectedly") a starting engine's own failure line
  follows is a failed start, not a crash. The exception ending the traceback under "EngineCore
  failed to start." (or a worker's) is the error, not that line.
- ``started``: serving: uvicorn's "Application startup complete", "Starting vLLM server on",
  a request answered 200, or the engine's periodic stats line (a captured log may lack the
  first). A signal's stop ("[shutdown] API server: shutdown triggered", 0.25+) stays started:
  the EngineDeadError its abort raises is teardown.
- ``crashed``: the engine died ("died unexpectedly", "exited unexpectedly", EngineDeadError,
  "EngineCore encountered a fatal error", the API server's output handler or V0's background
  task failing, V0's iteration timing out (also a hang signal), a CUDA fault, the scheduler
  state dumped when model execution raises) under a server or an offline job that was running.
  Its error is the root cause when one follows (a CUDA fault, the fatal-error traceback's
  exception), else the crash line (none after a dump alone).

(The lines that say the engine stopped making progress: ``log_hangs``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collector.vllm import log_formats as fmt
from collector.vllm.log_traceback import is_exception, is_source_line, traceback_line

# The lines run_engine_core and a worker's constructor log over the traceback of their failure.
_FAILED_HEADER = re.compile(r"(?:EngineCore|WorkerProc) failed to start")
_BELOW_ERROR = ("DEBUG", "INFO", "WARNING", "WARN")


@dataclass(frozen=True)
class Outcome:
    """What one line says about how the start ends: the new outcome and its error line."""

    outcome: str
    error: str | None
    root_cause: bool = False


@dataclass
class OutcomeState:
    """Per start: whether its error is already a root cause, and an open traceback. Before
    any start: a traceback pasted without vLLM's header line (``loose``), its last exception
    line so far, and, once its frames opened a start, whether that start waits for its error."""

    root_cause: bool = False
    in_traceback: bool = False
    loose: bool = False
    loose_error: str | None = None
    awaiting_error: bool = False
    # The process whose "EngineCore encountered a fatal error." traceback is still open ("" for
    # untagged lines): its exception says why, even with another engine's lines in between.
    fatal_proc: str | None = None
    # The start was opened by a root cause (no earlier line of it in the capture) or by a
    # traceback pasted without its header: ``failed`` is a guess a running frame or a crash
    # line corrects.
    guessed: bool = False
    # The start failed on a traceback's frame alone (its exception not yet read): a step's
    # frame further down says the engine was running.
    frame_failed: bool = False
    # Python reported an exception it went on from ("Exception ignored in: ..."): its traceback.
    ignored: bool = False
    # A process died (``DIED``) with nothing saying the engine had served: a starting engine's
    # own failure line after it makes the start failed.
    died: bool = False
    # The process whose "EngineCore failed to start." traceback is still open: its exception,
    # not that header, says why the start failed.
    failing_proc: str | None = None


def opens_under_way(msg: str) -> bool:
    """A line of a start past its beginning (``UNDER_WAY``)."""
    return any(p.search(msg) for p in fmt.UNDER_WAY)


_OPENERS = (
    fmt.DRAFTER,  # detected or loaded only while a start loads its weights
    # The API server waits for its engines only while they start (V1's DEBUG line).
    re.compile(r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to (?:start|connect)"),
    fmt.MODEL_LOAD,
    fmt.PROFILING,
    fmt.CAPTURE,
    fmt.POOL,
    fmt.INIT_ENGINE,  # the engine's init total: the last plan line before it is ready
    fmt.READY,
    fmt.SERVING,
    fmt.ANSWERED,
    fmt.ROOT_CAUSE,
    fmt.GENERIC_FAIL,
    fmt.CRASH,
    fmt.DUMP,
)


def opens_start(msg: str, *, server: bool = True) -> bool:
    """A plan or outcome line in a capture that missed the start of its server (``server``:
    the line comes from the server's stream)."""
    if is_source_line(msg):
        return False
    return any(p.search(msg) for p in _OPENERS) or (server and answered_here(msg))


def answered_here(msg: str) -> bool:
    """The server's own access log answering (``ANSWERED_HERE``): read from its stream only."""
    return fmt.ANSWERED_HERE.search(msg) is not None


def loose_traceback(state: OutcomeState, msg: str, clean: str) -> str | None:
    """A line of a traceback pasted without its header, before any start: the outcome once a
    frame says where it was raised (``failed`` while the engine started, ``crashed`` in its
    busy loop), else None. Its exception lines are kept in ``state`` for the error."""
    framed = traceback_line(msg)
    if msg.strip() == fmt.TRACEBACK or framed:
        state.loose = True
    if not state.loose:
        return None
    if is_exception(msg):
        state.loose_error = clean
        return None
    if not framed:
        return None
    if fmt.RUNNING_FRAME.search(msg):
        return "crashed"
    if fmt.STARTUP_FRAME.search(msg):
        return "failed"
    return None


def _fatal_cause(
    state: OutcomeState, outcome: str, msg: str, clean: str, proc: str
) -> Outcome | None:
    """The exception ending the engine's fatal-error traceback (matched by its process tag, as
    data-parallel engines' tracebacks interleave): the crash's cause, unless one is known."""
    if state.fatal_proc != proc or not is_exception(msg):
        return None
    state.fatal_proc = None
    if outcome != "crashed" or state.root_cause:
        return None
    return Outcome("crashed", clean, root_cause=fmt.ROOT_CAUSE.search(msg) is not None)


def _startup_cause(
    state: OutcomeState, outcome: str, msg: str, clean: str, proc: str, error: str | None
) -> Outcome | None:
    """The exception ending the traceback under the engine's (or a worker's) "failed to start"
    line, from the same process (tracebacks interleave): the failure's cause, in that line's
    place."""
    if state.failing_proc != proc or not is_exception(msg):
        return None
    state.failing_proc = None
    if outcome != "failed" or error is None or not _FAILED_HEADER.search(error):
        return None
    return Outcome("failed", clean, root_cause=fmt.ROOT_CAUSE.search(msg) is not None)


def _guess_corrected(state: OutcomeState, msg: str, error: str | None) -> Outcome | None:
    """A guessed failure that a running frame, a crash line or the scheduler dump (model
    execution raised) shows died while serving."""
    running = traceback_line(msg) and fmt.RUNNING_FRAME.search(msg) is not None
    said = not is_source_line(msg) and (fmt.CRASH.search(msg) or fmt.DUMP.search(msg))
    if not (running or said):
        return None
    state.guessed, state.died = False, not running and fmt.DIED.search(msg) is not None
    return Outcome("crashed", error, root_cause=fmt.ROOT_CAUSE.search(error or "") is not None)


def _engine_died(
    state: OutcomeState,
    outcome: str,
    level: str | None,
    msg: str,
    clean: str,
    phase: str | None,
    ready: bool,
    error: str | None,
) -> Outcome | None:
    """A frame of the engine's or a worker's traceback (``ENGINE_LOGGED``, at ERROR), of the
    server process's uncaught one (``SERVER_TOP``) or of a bare one through the engine's
    startup (``STARTUP_FRAME``) while its start was under way: the start failed; the
    traceback's exception line, if captured, is its error. The engine's or a
    worker's is a running engine's once the engine is ready (``ready``: its init total
    printed) or where its frame is a step's (``RUNNING_FRAME``): it crashed. An offline job
    prints no serving line, so only these tell its start from its run."""
    if not fmt.FRAME.match(msg.lstrip(" ")):
        return None
    engine = level == "ERROR" and fmt.ENGINE_LOGGED.search(clean) is not None
    running = engine and (ready or fmt.RUNNING_FRAME.search(msg) is not None)
    if running and (
        (outcome == "incomplete" and phase in fmt.STARTING)
        or (outcome == "failed" and state.frame_failed and error is None)
    ):
        state.in_traceback = True
        return Outcome("crashed", None)
    if outcome != "incomplete" or phase not in fmt.STARTING:
        return None
    # A bare traceback (no log prefix: an offline job's own) through the engine's construction.
    bare = level is None and state.in_traceback and fmt.STARTUP_FRAME.search(msg) is not None
    if not engine and not bare and fmt.SERVER_TOP.search(msg) is None:
        return None
    state.in_traceback = True
    state.frame_failed = True
    return Outcome("failed", None)


def _ignored(state: OutcomeState, msg: str) -> bool:
    """A line of the traceback Python prints for an exception it ignored, to its exception."""
    if fmt.IGNORED.match(msg) or (
        state.ignored and (msg.strip() == fmt.TRACEBACK or traceback_line(msg))
    ):
        state.ignored = True
        return True
    was, state.ignored = state.ignored, False
    return was and is_exception(msg)


def outcome_of(
    state: OutcomeState,
    *,
    outcome: str,
    level: str | None,
    msg: str,
    clean: str,
    proc: str = "",
    error: str | None = None,
    phase: str | None = None,
    server: bool = True,
    ready: bool = False,
) -> Outcome | None:
    """The outcome a line moves the start to (``outcome``: where it is now, ``error`` its
    error so far, ``phase`` its phase; ``server``: the line comes from the server's stream;
    ``ready``: the engine printed its init total), else None."""
    if outcome == "started" and phase == "stopped":
        # After a clean stop an error or a worker's exit is teardown's ("CUDA error: driver
        # shutting down" from a destructor run after the CUDA runtime unloaded), no crash.
        return None
    if state.guessed and outcome == "failed":
        return _guess_corrected(state, msg, error)
    fatal = _fatal_cause(state, outcome, msg, clean, proc)
    if fatal is not None:
        return fatal
    cause = _startup_cause(state, outcome, msg, clean, proc, error)
    if cause is not None:
        return cause
    if is_source_line(msg) or _ignored(state, msg):
        return None
    died = _engine_died(state, outcome, level, msg, clean, phase, ready, error)
    if died is not None:
        return died
    if msg.strip() == fmt.KILLED and server and outcome in ("incomplete", "started"):
        return Outcome("failed" if outcome == "incomplete" else "crashed", clean, root_cause=True)
    if (
        fmt.READY.search(msg)
        or fmt.SERVING.search(msg)
        or fmt.ANSWERED.search(msg)
        or (server and answered_here(msg))
        or fmt.STATS.search(msg)
        or fmt.SPEC.search(msg)
    ):
        return Outcome("started", None) if outcome == "incomplete" else None
    if fmt.DUMP.search(msg):
        return None if outcome in ("crashed", "failed") else Outcome("crashed", None)
    if fmt.CRASH.search(msg):
        if (outcome == "crashed" and error is not None) or (
            outcome == "failed" and state.root_cause
        ):
            return None  # a failed start's engine dying is its consequence
        if fmt.FATAL_HEADER.search(msg):
            state.fatal_proc = proc
        state.died = outcome == "incomplete" and fmt.DIED.search(msg) is not None
        return Outcome("crashed", clean)
    if msg.strip() == fmt.TRACEBACK:
        # One logged below ERROR is an exception vLLM went on from (at WARNING: "Module
        # vllm.third_party.deep_gemm was found but failed to import", its ImportError).
        state.in_traceback = level not in _BELOW_ERROR
        return None
    raised = state.in_traceback and is_exception(msg)
    if raised:
        state.in_traceback = False
    elif level in _BELOW_ERROR:
        return None  # e.g. the max_model_len override is only a WARNING
    if _FAILED_HEADER.search(msg):
        state.failing_proc = proc
    root = fmt.ROOT_CAUSE.search(msg) is not None
    generic = bool(raised) or fmt.GENERIC_FAIL.search(msg) is not None
    if not (root or generic):
        return None
    if outcome == "started":
        if fmt.CUDA_FAULT_RE.search(msg):  # a CUDA fault kills the engine
            return Outcome("crashed", clean, root_cause=True)
        return Outcome("crashed", clean) if fmt.GENERIC_FAIL.search(msg) else None
    if outcome == "crashed" and state.died and fmt.STARTUP_FAIL.search(msg):
        state.died = False  # the process died while the engine was still starting
        return Outcome("failed", error, root_cause=state.root_cause)
    if outcome == "crashed":
        # A root cause beats the crash line it explains (EngineDeadError, a worker dying).
        return Outcome("crashed", clean, root_cause=True) if root and not state.root_cause else None
    if outcome == "failed" and (state.root_cause or (not root and error is not None)):
        return None  # the first root cause (else the first failure line) says why
    return Outcome("failed", clean, root_cause=root)
