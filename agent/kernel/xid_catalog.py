"""NVIDIA's Xid catalog, one entry per code: mnemonic, NVIDIA's immediate and investigatory
resolution, the action freezewatch recommends and the meaning in our words.

The facts live in ``data/xid_catalog.tsv`` (its header names the sources and the mapping from
NVIDIA's resolutions to our actions). Codes outside the catalog are still ``xid`` events, with
a generic meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from agent.kernel.event import KernelAction

# Read through importlib.resources: inside the agent's zipapp there is no file path.
DATA = resources.files("agent.kernel") / "data"
ACTIONS = tuple(KernelAction)
# The actions that mean the GPU (or the host) cannot go on as it is: a fatal Xid.
FATAL_ACTIONS = frozenset(
    {KernelAction.RESET_GPU, KernelAction.REBOOT, KernelAction.INSPECT_HARDWARE}
)


@dataclass(frozen=True)
class XidInfo:
    """One catalogued Xid code."""

    code: int
    mnemonic: str
    immediate: str
    investigatory: str
    action: str
    meaning: str

    @property
    def fatal(self) -> bool:
        return self.action in FATAL_ACTIONS

    @property
    def needs_reset(self) -> bool:
        return self.action == "reset_gpu"

    @property
    def needs_reboot(self) -> bool:
        return self.action == "reboot"


def read_tsv(name: str) -> list[list[str]]:
    """The rows of one of our data files, comments and the header row left out."""
    rows = []
    for line in DATA.joinpath(name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            rows.append(line.split("\t"))
    return rows[1:]


@cache
def xid_catalog() -> dict[int, XidInfo]:
    """Every catalogued code."""
    out = {}
    for code, mnemonic, immediate, investigatory, action, meaning in read_tsv("xid_catalog.tsv"):
        assert action in ACTIONS, (code, action)
        out[int(code)] = XidInfo(
            int(code), mnemonic, immediate, investigatory, action, meaning[:1].upper() + meaning[1:]
        )
    return out


def xid_info(code: int) -> XidInfo | None:
    return xid_catalog().get(code)


def xid_meaning(code: int) -> str:
    """Our meaning of an Xid code, or a generic text for a code outside the catalog."""
    info = xid_info(code)
    return info.meaning if info else f"Xid {code} (not in NVIDIA's catalog)"
