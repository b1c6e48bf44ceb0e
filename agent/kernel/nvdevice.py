"""Which GPU an NVIDIA driver line names: its PCI address (``0000:01:00``, ``01:00.0``) or the
driver's ``GPU<n>`` index, spelled one way per GPU so repeats of a fault on it are counted
together. Shared by the Xid/NV_ERR classifier (``nvidia``) and the GSP one (``gsp``).
"""

from __future__ import annotations

import re

BDF = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?"
_GPU_PCI = re.compile(rf"NVRM: GPU (?P<pci>{BDF}):")
_GPU_INDEX = re.compile(r"NVRM:?\s+GPU(?P<gpu>\d+)\s")


def device_key(pci: str | None) -> str | None:
    """One spelling per GPU: ``0000:bb:dd`` (domain padded, function dropped)."""
    if not pci:
        return None
    pci = pci.lower()
    if pci.count(":") == 1:
        pci = "0000:" + pci
    return pci[:-2] if pci[-2:-1] == "." else pci


def gpu_device(text: str) -> str | None:
    """The GPU an ``NVRM: GPU<n>`` or ``NVRM: GPU <pci>:`` line names, else None."""
    m = _GPU_INDEX.search(text)
    if m:
        return f"GPU{m.group('gpu')}"
    p = _GPU_PCI.search(text)
    return device_key(p.group("pci")) if p else None
