"""The wheel carries templates/ and migrations/: install it alone and migrate a new database."""

from __future__ import annotations

import shutil
import site
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_installs_and_migrates(tmp_path: Path) -> None:
    # Build from a copy: setuptools reuses an in-tree build/ directory, whose stale files
    # (a renamed migration, say) would end up in the wheel.
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "demo-data",
            "test-artifacts", "freezewatch-data", "node_modules", ".pytest_cache", ".ruff_cache",
        ),
    )  # fmt: skip
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(src),
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("freezewatch-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies come from the test venv's site-packages, appended after the wheel's own
    # install location (a path in a .pth file is not itself scanned for .pth files, so the
    # project's editable install stays invisible).
    (Path(purelib) / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            purelib,
            str(wheel),
        ],
        check=True,
    )
    where = subprocess.run(
        [str(py), "-c", "import collector, templates, migrations; print(collector.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert where.startswith(purelib), where
    db_path = tmp_path / "new.db"
    script = venv / "bin" / "freezewatch-collector"
    script.write_text(f"#!{py}\nimport sys\nfrom collector.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    subprocess.run(
        [str(script), "migrate", "--db", f"sqlite:///{db_path}"], check=True, cwd=tmp_path
    )
    tables = {r[0] for r in sqlite3.connect(db_path).execute("SELECT name FROM sqlite_master")}
    assert {"hosts", "samples", "lines", "alembic_version"} <= tables
    pages = Path(purelib) / "templates"
    assert (pages / "base.html").exists() and (pages / "host.html").exists()
