"""A Ctrl-C at any moment of ``freezewatch-collector serve``'s start ends it quietly: while its
imports load (seconds on a slow machine), while it migrates, or once uvicorn serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


# Python sends itself SIGINT as a module is looked up: a Ctrl-C in the imports, every time.
# ``datetime`` is first imported by pydantic-core's Rust init (PyCapsule_Import): an exception
# raised there becomes a pyo3 panic with a Rust backtrace, whatever the exception.
INTERRUPTED_IMPORT = """
import importlib.abc, os, signal, sys
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == sys.argv[2]:
            os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, Interrupt())
from collector.__main__ import run
sys.exit(run())
"""


@pytest.mark.parametrize("module", ["collector.cli", "datetime"])
def test_a_ctrl_c_during_the_imports_is_exit_130(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IMPORT, "serve", module],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


def test_a_ctrl_c_before_a_command_takes_over_is_exit_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from collector import cli

    def interrupted(_args: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "migrate", interrupted)
    assert cli.main(["--db", "sqlite://", "migrate"]) == 130


# The script's own lines (``python -m collector`` less its name), after a line that says the
# interpreter's own start (``site``, where a Ctrl-C is CPython's to report) is over.
SCRIPT = (
    "import sys; print('started', flush=True); from collector.__main__ import run; sys.exit(run())"
)


@pytest.mark.parametrize("after_s", [0.2, 1.0, 2.5])
def test_serve_interrupted_early_prints_no_traceback(tmp_path: Path, after_s: float) -> None:
    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": f"sqlite:///{tmp_path / 'fw.db'}",
        "FREEZEWATCH_PORT": str(free_port()),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    text = out.decode(errors="replace")
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    # 130: stopped in the imports or a migration; 0: uvicorn's own clean stop.
    assert proc.returncode in (130, 0), (proc.returncode, text)
