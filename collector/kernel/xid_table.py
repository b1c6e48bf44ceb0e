"""NVIDIA's documented Xid codes: mnemonic and meaning, for annotating `NVRM: Xid` lines.

Sources: mnemonics from open-gpu-kernel-modules `src/common/sdk/nvidia/inc/nverror.h`, meanings
from NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors). Codes outside this table are
still classified as `xid` events, with a generic meaning.
"""

from __future__ import annotations

from typing import NamedTuple


class XidInfo(NamedTuple):
    """One documented Xid code."""

    mnemonic: str
    meaning: str


XID_TABLE: dict[int, XidInfo] = {
    13: XidInfo("GR_EXCEPTION", "Graphics engine exception (usually an application error)"),
    31: XidInfo("FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault"),
    43: XidInfo("RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (channel reset)"),
    45: XidInfo(
        "PREEMPTIVE_REMOVAL", "Preemptive cleanup due to previous errors or application killed"
    ),
    48: XidInfo("GPU_ECC_DBE", "Double-bit ECC error"),
    61: XidInfo("PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning"),
    62: XidInfo("PMU_HALT_ERROR", "Internal micro-controller halt"),
    63: XidInfo(
        "INFOROM_PAGE_RETIREMENT_EVENT", "ECC page retirement or row-remapping recording event"
    ),
    64: XidInfo(
        "INFOROM_PAGE_RETIREMENT_FAILURE",
        "ECC page retirement or row-remapping recording failure",
    ),
    74: XidInfo("NVLINK_ERROR", "NVLink error"),
    79: XidInfo("GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus"),
    92: XidInfo("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate"),
    94: XidInfo("CONTAINED_ERROR", "Contained ECC error"),
    95: XidInfo("UNCONTAINED_ERROR", "Uncontained ECC error"),
    109: XidInfo("CTXSW_TIMEOUT", "Context-switch timeout"),
    119: XidInfo("GSP_RPC_TIMEOUT", "GSP RPC timeout (GPU firmware not responding)"),
    120: XidInfo("GSP_ERROR", "GSP error (GPU firmware exception)"),
    154: XidInfo("GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed"),
    158: XidInfo("GPU_FATAL_TIMEOUT", "GPU fatal timeout"),
    175: XidInfo("MEMORY_SUBSYSTEM_ERROR", "Memory subsystem error"),
}


def xid_meaning(code: int) -> str:
    """The documented meaning of an Xid code, or a generic text for undocumented codes."""
    info = XID_TABLE.get(code)
    return info.meaning if info else f"Xid {code} (not in the documented table)"
