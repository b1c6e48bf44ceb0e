"""Uncorrected PCIe AER errors: a link or device error the hardware could not correct, on a GPU's
port the last word before the GPU falls off the bus or the host freezes.

A report is several lines; the event is the per-device line every kernel since 2.6.3x prints,
``<drv> <bdf>: [AER: ]PCIe Bus Error: severity=Uncorrected (Fatal), type=..., (...)`` (``CXL Bus
Error`` on CXL devices since 6.x; newer kernels say ``Uncorrectable``, the PCIe spec's term).
Native AER, DPC containment and EDR all print it; only native AER prints the ``[Multiple ]
Uncorrected (Fatal) error received`` line before it, which names the root port rather than the
failing device, so that one restates the report and is no event.
Corrected errors flood (retried links) and are never an event.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event

NEEDLE = "severity=Uncorrect"  # "Uncorrected", or "Uncorrectable" in newer kernels
# "pcieport 0000:00:02.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=..." (the
# device is absent from a bare paste; VMD domains run past four digits)
_AER = re.compile(
    r"(?:(?P<pci>\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): (?:AER: )?)?"
    r"(?:PCIe|CXL) Bus Error: severity=Uncorrect(?:ed|able) \((?P<severity>Fatal|Non-Fatal)\)"
    r"(?:, type=(?P<type>[\w ]+))?"
)
AER_MEANINGS = {
    "fatal": "uncorrected fatal PCIe error: the link or device failed and the hardware could "
    "not correct it; on a GPU's port it precedes the GPU falling off the bus",
    "nonfatal": "uncorrected non-fatal PCIe error: a transaction was lost, the link is up; "
    "on a GPU's port it can precede a fatal one",
}
# A fatal one resets the link; a driver without AER recovery (nvidia's) loses the device.
_FATAL_ADVICE = ("fatal", "reboot")


def classify_aer(text: str) -> KernelEvent | None:
    """The uncorrected AER error a ``PCIe Bus Error`` line reports, else None."""
    m = _AER.search(text)
    if m is None:
        return None
    code = "fatal" if m.group("severity") == "Fatal" else "nonfatal"
    pci = m.group("pci").lower() if m.group("pci") else None
    layer = m.group("type")
    return make_event(
        "aer",
        _FATAL_ADVICE if code == "fatal" else None,
        code=code,
        device=pci,
        pci=pci,
        meaning=AER_MEANINGS[code] + (f" ({layer.strip()})" if layer else ""),
        detail=text.strip(),
    )
