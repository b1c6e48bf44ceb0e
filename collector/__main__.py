"""``python -m collector`` and the ``freezewatch-collector`` script: the CLI. Until its imports
are loaded (seconds on a slow machine) a Ctrl-C exits 130 quietly, not in a traceback; after,
Python's usual KeyboardInterrupt, which ``cli.main`` and uvicorn handle."""

import os
import signal
import sys
from types import FrameType


def _quit(_signum: int, _frame: FrameType | None) -> None:
    # Not SystemExit: raised inside a C extension's init (pydantic-core's Rust imports datetime)
    # it becomes a pyo3 panic with a backtrace. Nothing is started or written yet to clean up.
    os._exit(130)


_before = signal.getsignal(signal.SIGINT)
if _before is signal.default_int_handler:  # not where SIGINT is ignored (started with `&`)
    signal.signal(signal.SIGINT, _quit)
from collector.cli import main  # noqa: E402 - under the handler above

signal.signal(signal.SIGINT, _before)


def run() -> int:
    return main()


if __name__ == "__main__":  # a spawned worker may import the main module again: not the CLI
    sys.exit(run())
