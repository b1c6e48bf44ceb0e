"""Build the agent's single-file zipapp: the ``agent`` package plus NVIDIA's pure-Python pynvml.

The archive is reproducible (sorted entries, fixed timestamps): the same sources give the same
bytes, so a deploy can tell an upgrade from a no-op by the file's hash.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path

import agent

SHEBANG = b"#!/usr/bin/env python3\n"
# What zipapp writes for main="agent.cli:main".
MAIN = "# -*- coding: utf-8 -*-\nimport agent.cli\nagent.cli.main()\n"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def _pynvml_file() -> Path | None:
    """The single-module ``pynvml.py`` of nvidia-ml-py, when installed here."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _entries(include_nvml: bool) -> dict[str, bytes]:
    package = Path(agent.__file__).parent
    entries = {
        "agent/" + path.relative_to(package).as_posix(): path.read_bytes()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    nvml = _pynvml_file() if include_nvml else None
    if nvml is not None:
        entries["pynvml.py"] = nvml.read_bytes()
    entries["__main__.py"] = MAIN.encode()
    return entries


def build_agent_bundle(out_path: str | Path, *, include_nvml: bool = True) -> Path:
    """Write OUT.pyz (runs ``agent.cli:main``, executable) and return its path."""
    out = Path(out_path)
    with out.open("wb") as f:
        f.write(SHEBANG)
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(_entries(include_nvml).items()):
                info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
    os.chmod(out, 0o755)
    return out
