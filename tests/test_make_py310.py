"""``make test-py310``'s own venv: one that is no usable Python 3.10 (made by another Python, or
left without pip by a ``venv`` cut short, as Debian's python3.10 without python3.10-venv leaves
it) is made again on the next run, never kept to fail every rerun. Stand-ins for Python: only
the recipe's shell is under test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

# A venv's python that answers every call as a Python 3.10 with pip would, and logs it.
USABLE = '#!/bin/sh\necho "$*" >> "$(dirname "$0")/calls"\n'
BROKEN = "#!/bin/sh\nexit 1\n"


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def python310(tmp_path: Path, *, works: bool) -> Path:
    """A stand-in for python3.10 whose ``-m venv DIR`` makes DIR/bin/python; one that does not
    work leaves a python there without pip and fails, as venv does without ensurepip."""
    venv_python = USABLE if works else BROKEN
    return executable(
        tmp_path / ("good" if works else "bad") / "python3.10",
        f'#!/bin/sh\nmkdir -p "$3/bin"\ncat > "$3/bin/python" <<\'EOF\'\n{venv_python}EOF\n'
        f'chmod +x "$3/bin/python"\nexit {0 if works else 1}\n',
    )


def make(venv: Path, py310: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "test-py310", f"PY310={py310}", f"VENV310={venv}",
         "TEST_WORKERS=0", "PYTEST_ARGS=-q"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_venv_that_is_no_usable_python_310_is_made_again(tmp_path: Path) -> None:
    venv = tmp_path / "venv310"
    executable(venv / "bin" / "python", BROKEN)  # another Python's, or one without pip
    done = make(venv, python310(tmp_path, works=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-m pytest -q tests/agent" in (venv / "bin" / "calls").read_text()


def test_a_venv_cut_short_is_not_kept_for_the_next_run(tmp_path: Path) -> None:
    venv = tmp_path / "venv310"
    failed = make(venv, python310(tmp_path, works=False))
    assert failed.returncode != 0
    done = make(venv, python310(tmp_path, works=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-m pytest" in (venv / "bin" / "calls").read_text()
    assert "python3.10-venv" in failed.stdout + failed.stderr  # what was missing
