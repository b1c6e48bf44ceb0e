"""``$FREEZEWATCH_TEST_BACKENDS`` (the Python 3.10 stage's SQLite-only run) leaves out exactly
the variants of the other database, and refuses a name it does not know."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Both databases, as fixture parameters and as the ``backend`` fixture.
FILES = ["tests/collector/api/test_schemathesis.py", "tests/collector/incidents/test_lifecycle.py"]


def collect(backends: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FREEZEWATCH_TEST_BACKENDS"}
    if backends is not None:
        env["FREEZEWATCH_TEST_BACKENDS"] = backends
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", *FILES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def ids(done: subprocess.CompletedProcess[str]) -> set[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_only_the_chosen_database_variants_are_collected() -> None:
    every = ids(collect(None))
    sqlite_only = ids(collect("sqlite"))
    assert any("postgres" in test for test in every)
    assert sqlite_only == {test for test in every if "postgres" not in test}
    assert any("sqlite" in test for test in sqlite_only)
    assert ids(collect("sqlite,postgres")) == every


def test_an_unknown_database_is_a_usage_error() -> None:
    done = collect("mysql")
    assert done.returncode != 0
    assert "unknown database(s) ['mysql']" in done.stdout + done.stderr
