"""The kernel event a line announces: its kind, code, device, meaning, severity and action."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum

from agent.wire import KERNEL_EVENT_KINDS

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # the agent runs on 3.10 too

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)


class Severity(StrEnum):
    """How bad a kernel event is; ``fatal``: the GPU or the host cannot go on as it is."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    FATAL = "fatal"


class KernelAction(StrEnum):
    """What to do about a kernel event, mildest first."""

    NONE = "none"
    RESTART_APP = "restart_app"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    INSPECT_HARDWARE = "inspect_hardware"


# kind → (severity, action) when nothing more specific is known (Xids: their catalog entry).
KIND_ADVICE: dict[str, tuple[str, str]] = {
    "xid": ("error", "none"),
    "sxid": ("error", "none"),
    "nv_err": ("error", "none"),
    "gsp": ("fatal", "reset_gpu"),
    "uvm": ("error", "restart_app"),
    "bus_off": ("fatal", "reboot"),
    "aer": ("error", "none"),  # nonfatal; a fatal one: ("fatal", "reboot")
    "iommu": ("error", "none"),  # the device got an error back; its driver decides what next
    "oops": ("fatal", "reboot"),
    "soft_lockup": ("error", "reboot"),
    "hung_task": ("warning", "none"),
    "rcu_stall": ("error", "reboot"),
    "oom_kill": ("error", "restart_app"),
    "alloc_failure": ("warning", "none"),
}
# The kinds' names are shared with the agent (its guard matches them on the host).
EVENT_KINDS = KERNEL_EVENT_KINDS
GPU_FAULT_KINDS = frozenset({"xid", "sxid", "nv_err", "gsp", "uvm", "bus_off"})
SEVERITIES = tuple(Severity)


@dataclass(frozen=True)
class KernelEvent:
    """A classified kernel message; fields a kind doesn't carry are None.

    ``code`` names the fault within its kind (the Xid or SXid number, the ``NV_ERR_*`` name,
    the GSP failure family, the oops flavour, AER's ``fatal``/``nonfatal``, the IOMMU's name for
    its fault); ``device`` is the GPU or NVSwitch (PCI address, else ``GPU<n>``) or, for ``aer``
    and ``iommu``, the PCI device as the kernel names it (``0000:00:01.0``, ``01:00.0``; an
    IOMMU fault without one: ``<smmu> sid 0x..``); ``module`` the kernel module an oops
    happened in.
    """

    kind: str
    code: str | None = None
    device: str | None = None
    xid: int | None = None
    pci: str | None = None
    pid: int | None = None
    process: str | None = None
    meaning: str | None = None
    nv_err: str | None = None
    call_site: str | None = None
    module: str | None = None
    detail: str | None = None
    severity: str = "error"
    action: str = "none"

    @property
    def fatal(self) -> bool:
        return self.severity == "fatal"


def make_event(kind: str, advice: tuple[str, str] | None = None, **fields: object) -> KernelEvent:
    """A ``kind`` event with ``advice`` (severity, action), else the kind's default advice."""
    severity, action = advice or KIND_ADVICE[kind]
    return KernelEvent(kind=kind, severity=severity, action=action, **fields)  # type: ignore[arg-type]
