"""Classify one kernel log line into a named event (NVIDIA driver faults, freeze precursors).

Called on every ingested kernel line: a cheap substring precheck rejects ordinary lines before
any prefix is looked at or any regex runs. The line may carry any prefix (``prefix``); the
event is found by its subsystem tag (Jetson's GPU by its error notifiers: ``nvgpu``). Benign
driver chatter (module load banners, GPU UUID and serial lines, RPC history dumps), corrected
PCIe errors (they flood), corrected or recoverable firmware-first (GHES) hardware errors and
IOMMU boot chatter yield None.
"""

from __future__ import annotations

from agent.kernel.aer import NEEDLE as AER_NEEDLE
from agent.kernel.aer import classify_aer
from agent.kernel.event import (
    EVENT_KINDS,
    GPU_FAULT_KINDS,
    KIND_ADVICE,
    SEVERITIES,
    KernelEvent,
)
from agent.kernel.generic import SERROR_NEEDLE, classify_generic
from agent.kernel.ghes import NEEDLE as GHES_NEEDLE
from agent.kernel.ghes import classify_ghes
from agent.kernel.iommu import NEEDLES as IOMMU_NEEDLES
from agent.kernel.iommu import classify_iommu
from agent.kernel.nvgpu import NEEDLE as NVGPU_NEEDLE
from agent.kernel.nvgpu import classify_nvgpu
from agent.kernel.nvidia import classify_nvidia
from agent.kernel.oops_head import NEEDLES as OOPS_HEAD_NEEDLES
from agent.kernel.prefix import kernel_message

__all__ = [
    "EVENT_KINDS",
    "GPU_FAULT_KINDS",
    "KIND_ADVICE",
    "SEVERITIES",
    "KernelEvent",
    "classify_kernel_line",
]

# Every event needs one of these substrings; ordinary lines fail all tests in C speed.
_PRECHECK = (
    "NVRM",
    "NV_ERR_",
    "nvidia-uvm",
    "SXid",
    NVGPU_NEEDLE,
    "lockup",
    "LOCKUP",
    "blocked for more than",
    "stall",
    "Killed process",
    "Kill process",
    "oom-killer",
    "Out of memory",
    "allocation failure",
    "vmalloc error",
    "cma_alloc",
    "[#",
    "Kernel panic",
    SERROR_NEEDLE,
    *OOPS_HEAD_NEEDLES,
    "@ pc:0x",
    AER_NEEDLE,
    GHES_NEEDLE,
    *IOMMU_NEEDLES,
)
# "@ pc:0x": a GSP CrashCat report's fault line, which the driver prints without its NVRM tag
_NVIDIA = ("NVRM", "NV_ERR_", "nvidia-uvm", "SXid", "@ pc:0x")


def classify_kernel_line(text: str) -> KernelEvent | None:
    """The event a kernel line announces, or None for ordinary and benign lines."""
    for needle in _PRECHECK:  # a plain loop: several times cheaper than any(<genexpr>)
        if needle in text:
            break
    else:
        return None
    message = kernel_message(text)
    for tag in _NVIDIA:
        if tag in message:
            event = classify_nvidia(message)
            if event is not None or message.startswith("NVRM"):
                return event  # the driver's own message is never one of the kernel's events
            break
    if NVGPU_NEEDLE in message:  # Jetson's GPU: its channel error notifier is an Xid
        return classify_nvgpu(message)
    if AER_NEEDLE in message:
        return classify_aer(message)
    if GHES_NEEDLE in message:
        event = classify_ghes(message)
        if event is not None:
            return event
    if any(needle in message for needle in IOMMU_NEEDLES):
        event = classify_iommu(message)
        if event is not None:
            return event
    return classify_generic(message)
