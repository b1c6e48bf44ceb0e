"""The agent zipapp runs on a bare interpreter and carries pynvml."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from collector.deploy.bundle import build_agent_bundle


def require_pynvml() -> None:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        reason = "nvidia-ml-py is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def test_bundle_runs_isolated_and_carries_pynvml(tmp_path: Path) -> None:
    require_pynvml()
    out = build_agent_bundle(tmp_path / "freezewatch-agent.pyz")
    assert out.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    names = set(zipfile.ZipFile(out).namelist())
    assert {"__main__.py", "pynvml.py", "agent/__init__.py", "agent/cli.py"} <= names
    assert "agent/sources/gpu.py" in names
    assert not any("__pycache__" in n for n in names)
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(out), "--help"],  # -S: no site-packages
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "freezewatch-agent" in result.stdout
    # -I ignores PYTHONPATH and -S drops site-packages (where the venv's pynvml lives):
    # the module can only come from the archive, the way the zipapp imports it.
    probe = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(out)!r}); import pynvml; print(pynvml.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == str(out / "pynvml.py")


def test_bundle_without_nvml(tmp_path: Path) -> None:
    out = build_agent_bundle(tmp_path / "a.pyz", include_nvml=False)
    assert "pynvml.py" not in zipfile.ZipFile(out).namelist()


def test_agent_bundle_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from collector.cli import main

    out = tmp_path / "dist" / "freezewatch-agent.pyz"
    assert main(["agent-bundle", str(out), "--no-nvml"]) == 0
    assert "agent bundle written" in capsys.readouterr().out
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
    assert "agent/cli.py" in names and "agent/catchup.py" in names
    assert "pynvml.py" not in names
    help_text = subprocess.run(
        [sys.executable, str(out), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--vllm-url" in help_text and "--netconsole" in help_text


def test_bundle_is_reproducible(tmp_path: Path) -> None:
    """The same sources, the same bytes: a redeploy sees an unchanged file as unchanged."""
    first = build_agent_bundle(tmp_path / "a.pyz").read_bytes()
    second = build_agent_bundle(tmp_path / "b.pyz").read_bytes()
    assert first == second
    assert os.access(tmp_path / "a.pyz", os.X_OK)


def test_the_kernel_classifier_reads_its_catalog_from_inside_the_bundle(tmp_path: Path) -> None:
    """The guard classifies kernel lines on the host with the catalog packed in the zipapp."""
    out = build_agent_bundle(tmp_path / "freezewatch-agent.pyz", include_nvml=False)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from agent.kernel.classify import classify_kernel_line;"
        "e = classify_kernel_line('NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen "
        "off the bus.'); print(e.kind, e.xid, e.severity, e.action)"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe, str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["xid", "79", "fatal", "reboot"]
