"""Jetson's integrated GPU (Tegra, the ``nvgpu`` driver, not nvidia.ko) reports a channel error
the way the discrete driver reports an Xid: with the error notifier the channel's process
receives,

    nvgpu: 17000000.gpu     nvgpu_set_err_notifier_locked:143  [ERR]  error notifier set to 31
    for ch 479 owned by consumer_thread

(L4T 32 prints no owner: "... error notifier set to 31 for ch 507"). The notifier's number is
the RM's robust-channel code, the Xid's: nvgpu's uapi ``NVGPU_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT`` is
8, ``..._GR_EXCEPTION`` 13, ``..._FIFO_ERROR_MMU_ERR_FLT`` 31, ``..._PBDMA_ERROR`` 32,
``..._RESETCHANNEL_VERIF_ERROR`` 43, the catalog's mnemonics for those Xids. So the line is an
``xid`` event of that code, on the GPU's platform device ("17000000.gpu"), one per channel as
the driver notifies each channel of a faulting TSG. The fault dump before it (the MMU fault,
"TSG 8 generated a mmu fault") is no event, nor a camera driver's notifier ("tegra-vi4
15700000.vi: error notifier set to 1"), nor nouveau's ("error notifier set to 31 for ch 4",
which names no owner; a notifier naming one is nvgpu's even when wrapped off its tag).
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event
from agent.kernel.nvidia import xid_advice

NEEDLE = "error notifier set to"
# The driver's tag and device, before the notifier's words: nvgpu_err() ("nvgpu: <dev> <func>:
# <line> [ERR]"), or dev_err() of the L4T 24 driver ("gk20a <dev>: <func>: ...", constructed from
# its printk format)
_DEVICE = re.compile(r"(?:\bnvgpu: |\bgk20a )(?P<dev>[\w.-]{1,64})")
_NOTIFIER = re.compile(
    re.escape(NEEDLE) + r" (?P<code>\d{1,4}),? (?:for )?ch (?P<ch>\d{1,6})"
    r"(?: owned by (?P<owner>\S{1,64}))?"
)


def classify_nvgpu(text: str) -> KernelEvent | None:
    """The Xid an nvgpu error-notifier line reports, else None."""
    at = text.find(NEEDLE)
    if at < 0:
        return None
    device = _DEVICE.search(text, 0, at)
    m = _NOTIFIER.match(text, at)
    # Without the tag (a reporter wrapped the line after "[ERR]") only the owner tells nvgpu's
    # notifier from nouveau's, whose "error notifier set to %d for ch %d" names none
    if m is None or (device is None and m.group("owner") is None):
        return None
    code = int(m.group("code"))
    advice, meaning = xid_advice(code, "")
    return make_event(
        "xid",
        advice,
        code=str(code),
        device=device.group("dev") if device else None,
        xid=code,
        process=m.group("owner"),
        meaning=f"{meaning} (nvgpu error notifier, ch {m.group('ch')})",
        detail=text.strip(),
    )
