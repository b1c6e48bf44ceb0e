"""Build the agent's single-file zipapp: the ``agent`` package plus NVIDIA's pure-Python pynvml."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import zipapp
from pathlib import Path

import agent

SHEBANG = "/usr/bin/env python3"


def _pynvml_file() -> Path | None:
    """The single-module ``pynvml.py`` of nvidia-ml-py, when installed here."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def build_agent_bundle(out_path: str | Path, *, include_nvml: bool = True) -> Path:
    """Write OUT.pyz (runs ``agent.cli:main``) and return its path."""
    out = Path(out_path)
    with tempfile.TemporaryDirectory(prefix="freezewatch-bundle-") as tmp:
        staging = Path(tmp)
        shutil.copytree(
            Path(agent.__file__).parent,
            staging / "agent",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        nvml = _pynvml_file() if include_nvml else None
        if nvml is not None:
            shutil.copy2(nvml, staging / "pynvml.py")
        zipapp.create_archive(
            staging, target=out, interpreter=SHEBANG, main="agent.cli:main", compressed=True
        )
    return out
