"""Firmware-first hardware errors (ACPI APEI GHES): servers and arm64 platforms (NVIDIA Grace,
Ampere, HiSilicon) hand memory, processor and PCIe errors to the kernel as CPER records, printed
line by line as ``{<seq>}[Hardware Error]: ...``.

A record's severity is on its ``event severity: fatal|recoverable|corrected|info`` line and its
section (``PCIe error``, ``memory error``, ``ARM processor error``) lines later, so no single
line names both: a fatal record is one ``oops`` event of code ``hardware`` on its severity line,
whatever the section. The kernel panics right after printing it (``__ghes_panic``), so it is
the crash's own report, and the ``Fatal hardware error`` panic line restates it. Corrected
records (they flood) and recoverable ones (the kernel contained them: page offlined, AER
recovery) are no event, like machine-check and EDAC reports; nor is BERT's replay at boot of
the previous boot's records (no ``{<seq>}``): that crash is over. x86 ``extlog`` (eMCA) numbers
its CPER records too but prints them without ``[Hardware Error]:`` (``{3}Hardware error
detected on CPU2``, ``{3}event severity: fatal``), from the machine-check decode chain, which a
fatal machine check never reaches before its ``Kernel panic - not syncing: Fatal machine
check``: that panic line is the crash's one event (``oops``/``hardware`` too, ``generic``),
and an extlog record is none.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event

NEEDLE = "severity: fatal"
# GHES numbers each record it prints ("{1}", "{763}"); BERT and the "mce: [Hardware Error]"
# lines do not. Some vendors' logs drop the space after the colon.
_FATAL = re.compile(r"\{\d+\}\[Hardware Error\]:? ?event severity: fatal\b")
HARDWARE_MEANING = (
    "fatal hardware error reported by firmware (APEI GHES): a PCIe, memory or processor error "
    "the platform could not contain; the kernel panics"
)
# The kernel stops, and the part will fail again: look at it before trusting the host.
_ADVICE = ("fatal", "inspect_hardware")


def classify_ghes(text: str) -> KernelEvent | None:
    """The fatal CPER record a ``{N}[Hardware Error]: event severity: fatal`` line opens."""
    if _FATAL.search(text) is None:
        return None
    return make_event(
        "oops", _ADVICE, code="hardware", meaning=HARDWARE_MEANING, detail=text.strip()
    )
