"""NVIDIA driver messages: Xid (every address form, the NVLink sub-fields, Xid 154's recovery
action), SXid (NVSwitch), GPU off the bus, ``NV_ERR_*`` and RM assertions, GSP failure families
(in ``gsp``) and nvidia-uvm errors. Input is a message found by ``prefix.kernel_message``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from agent.kernel.event import KernelEvent, make_event
from agent.kernel.gsp import classify_gsp, may_be_gsp
from agent.kernel.nvdevice import BDF as _BDF
from agent.kernel.nvdevice import device_key, gpu_device
from agent.kernel.nvlink import NVLINK_XIDS, decode_nvlink
from agent.kernel.xid_catalog import FATAL_ACTIONS, xid_info, xid_meaning

# "Xid (PCI:0000:01:00)", "(0000:01:00)", "(01:00)"; MIG adds " GPU-I:01 GPU-CI:00"; a report
# whose author replaced the address with "..." ("Xid (PCI:...): 145") is still that Xid, of no GPU.
# The MIG suffix is bounded: a long line of "Xid (" repeats must not rescan to its end each time
_XID = re.compile(
    rf"\bXid \((?:PCI:)?(?:(?P<pci>{_BDF})|\.\.\.)(?P<mig>[^)]{{0,40}})\):\s*(?P<code>\d+)"
    r"(?:,\s*(?P<rest>.*))?"
)
_XID_PROC = re.compile(r"^pid=(?P<pid>'?[^,]*?'?),\s*name=(?P<name>[^,]*?),\s*(?P<rest>.*)$")
_XID_PID_ONLY = re.compile(r"^pid=(?P<pid>'?[^,]*?'?),\s*(?P<rest>.*)$")
_RECOVERY = re.compile(
    r"recovery action changed from \S+ \((?P<old>[^)]*)\) to \S+ \((?P<new>[^)]*)\)"
)
_RECOVERY_ACTION = {
    "none": "none",
    "gpu reset required": "reset_gpu",
    "drain and reset": "reset_gpu",
    "drain p2p": "reset_gpu",
    "node reboot required": "reboot",
    # the newer drivers' names for the same two (e.g. 610: "to 0x2 (OS Reboot)")
    "pf flr": "reset_gpu",
    "os reboot": "reboot",
    "recover imex domain": "none",
}
_SXID = re.compile(
    rf"(?:nvidia-nvswitch(?P<sw>\d+): )?SXid \((?:PCI:)?(?P<pci>{_BDF})\):\s*(?P<code>\d+)"
    r"(?:,\s*(?P<rest>.*))?"
)
_SXID_LINK = re.compile(r"\bLink (?P<link>\d+)\b")
# The dump of an SXid's error entry (_nvswitch_dump_error_entry) prints the entry's
# NVSWITCH_ERROR_SEVERITY_TYPE: NONFATAL = 0, FATAL = 1 (ctrl_dev_nvswitch.h), the driver's
# own verdict on the error, as its verdict line ("Fatal, ..." / "Non-fatal, ...") says it.
_SXID_SEVERITY = re.compile(r"Severity (?P<n>\d{1,3}) Engine instance\b")
_SXID_SEVERITIES = {"0": "non-fatal", "1": "fatal"}
_BUS_OFF_PCI = re.compile(rf"\bGPU (?:at )?(?:PCI:)?(?P<pci>{_BDF})")
_NV_ERR = re.compile(r"\bNV_ERR_[A-Z0-9_]+")
# The status an NV_ASSERT_OK/NV_CHECK_OK failed with, as nvstatuscodes prints it: "desc [NAME]"
_NV_ERR_STATUS = re.compile(r"\[(NV_ERR_[A-Z0-9_]+)\]")
# NV_ASSERT/NV_CHECK(cond) print the condition's source text: "Assertion failed: <cond> @ f.c:1",
# "Check failed: <cond> @ f.c:1"; a status named in it ("(status == NV_ERR_GPU_IN_FULLCHIP_RESET)")
# is not the error
_ASSERT_COND = re.compile(r"(?:Assertion|Check) failed: (?P<cond>.*) @ [\w./-]+:\d+")
# Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from f(x) @ file.c:1359
_NV_STATUS_DESC = re.compile(r"(?:Check|Assertion) failed: (?P<desc>[^\[]*?)\s*\[NV_ERR_")
_CALL_SITE = re.compile(
    r"returned from (?P<func>[A-Za-z_][\w:]*)(?:\([^@]*\))?\s*@\s*(?P<file>[\w./-]+:\d+)"
)
_NV_ASSERT = re.compile(r"\bnv(?:Check|Assert)\w*Failed\w*:")
# "NVRM: GPU6 _kgspBootGspRm: ..." / "NVRM kgspInitRm_IMPL: ..." (older drivers, no colon)
_UVM_BAD = re.compile(r"[Ee]rror|[Ff]atal|[Ff]ault|[Ff]ail|[Tt]imeout|ECC|[Aa]ssert")
_UVM_BENIGN = ("Loaded the UVM driver", "Unloaded the UVM driver")
# The RC watchdog's own report of a hung GPU: "NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably
# locked!  Notify Timeout Seconds: 7". Its recovery then resets the stuck channel as an Xid 8
# (which names the GPU; this line does not); when recovery fails it repeats every ~8 s, alone.
# "GPU is possibly locked" is its earlier, self-described harmless stage (busy during a modeset).
_RC_WATCHDOG = re.compile(r"RC watchdog: GPU is probably locked\b(?:\D*Seconds: (?P<secs>\d+))?")
_RC_WATCHDOG_XID = 8
# A driver call that failed with the GPU gone, by its status number only: "kgmmuInvalidateTlb_GM107:
# TLB invalidation failed waiting for prior invalidate (status=0x0000000f)" after the GPU fell off
# the bus. 0xf is NV_ERR_GPU_IS_LOST; a GSP client's such line (GspRmFree) is a GSP error first.
# Found as "failed", then the status after it (two scans: ".*" between them rescanned the
# line from every "failed" of a long one).
_FAILED = re.compile(r"\bfailed\b")
_GPU_LOST_STATUS = re.compile(r"\(status=0x0*[fF]\)")
_GPU_LOST = "NV_ERR_GPU_IS_LOST"
# A status that says what to do: out of memory ends the app; the GPU lost from the bus is Xid 79's
# case (NVIDIA's resolution: restart the machine), whichever driver call met it
_NV_ERR_ADVICE = {"NV_ERR_NO_MEMORY": ("error", "restart_app"), _GPU_LOST: ("fatal", "reboot")}


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip("'\" ")
    return int(value) if value.isdigit() else None


def xid_advice(code: int, rest: str) -> tuple[tuple[str, str], str]:
    """(severity, action) and the meaning of one Xid line."""
    meaning = xid_meaning(code)
    info = xid_info(code)
    action = info.action if info else "none"
    if code in NVLINK_XIDS:
        decoded = decode_nvlink(code, rest)
        if decoded is not None:
            return (decoded.severity, decoded.action), f"{meaning}: {decoded.describe()}"
    if code == 154:
        m = _RECOVERY.search(rest)
        if m:
            action = _RECOVERY_ACTION.get(m.group("new").strip().lower(), "reset_gpu")
            meaning = f"{meaning}: now {m.group('new')}"
            return ("fatal" if action in FATAL_ACTIONS else "info", action), meaning
    if info is None:
        return ("error", "none"), meaning
    if action in FATAL_ACTIONS:
        return ("fatal", action), meaning
    return ("error" if action == "restart_app" else "warning", action), meaning


def _classify_xid(text: str) -> KernelEvent | None:
    m = _XID.search(text)
    if m is None:
        return None
    code = int(m.group("code"))
    rest = m.group("rest") or ""
    pid: int | None = None
    process: str | None = None
    pm = _XID_PROC.match(rest)
    if pm:
        pid, process, rest = (
            _int_or_none(pm.group("pid")),
            pm.group("name").strip(),
            pm.group("rest"),
        )
        if process.strip("'<>") in ("unknown", ""):
            process = None
    else:
        pm = _XID_PID_ONLY.match(rest)
        if pm:
            pid, rest = _int_or_none(pm.group("pid")), pm.group("rest")
    advice, meaning = xid_advice(code, rest)
    pci = m.group("pci").lower() if m.group("pci") else None
    return make_event(
        "xid",
        advice,
        code=str(code),
        device=device_key(pci),
        xid=code,
        pci=pci,
        pid=pid,
        process=process,
        meaning=meaning,
        detail=rest.strip() or None,
    )


def sxid_verdict(rest: str | None) -> str | None:
    """'fatal' or 'non-fatal' as an SXid line's text after its code says it: its verdict line,
    or its dump's Severity line; None for a line that says neither (the Data dump)."""
    rest = (rest or "").strip()
    verdict = rest.split(",", 1)[0].strip().lower()
    if verdict in ("fatal", "non-fatal"):
        return verdict
    m = _SXID_SEVERITY.match(rest)
    return _SXID_SEVERITIES.get(m.group("n")) if m else None


def _classify_sxid(text: str) -> KernelEvent | None:
    m = _SXID.search(text)
    if m is None:
        return None
    rest = (m.group("rest") or "").strip()
    verdict = sxid_verdict(rest)
    if verdict == "fatal":
        advice = ("fatal", "reboot")
    elif verdict == "non-fatal":
        advice = ("warning", "none")
    else:
        advice = None
    link = _SXID_LINK.search(rest)
    where = f"NVSwitch {m.group('sw')}" if m.group("sw") else "NVSwitch"
    meaning = f"{where} error {m.group('code')}"
    if link:
        meaning += f" on link {link.group('link')}"
    pci = m.group("pci").lower()
    return make_event(
        "sxid",
        advice,
        code=m.group("code"),
        device=device_key(pci),
        pci=pci,
        meaning=f"{meaning} ({verdict})" if advice else meaning,
        detail=rest or None,
    )


def _nv_err_name(text: str) -> str | None:
    """The ``NV_ERR_*`` status a line reports: the bracketed one, else a bare name outside an
    asserted condition."""
    status = _NV_ERR_STATUS.search(text)
    if status:
        return status.group(1)
    cond = _ASSERT_COND.search(text) if " failed: " in text else None
    for nv in _NV_ERR.finditer(text):
        if cond is None or not cond.start("cond") <= nv.start() < cond.end("cond"):
            return nv.group(0)
    return None


def _classify_nv_err(text: str) -> KernelEvent | None:
    name = _nv_err_name(text) if "NV_ERR_" in text else None
    if name is None and not ("Failed" in text and _NV_ASSERT.search(text)):
        return None
    desc = _NV_STATUS_DESC.search(text)
    site = _CALL_SITE.search(text)
    return make_event(
        "nv_err",
        _NV_ERR_ADVICE.get(name or ""),
        code=name or "assertion",
        device=gpu_device(text),
        nv_err=name,
        meaning=desc.group("desc").strip() if desc else None,
        call_site=f"{site.group('func')} @ {site.group('file')}" if site else None,
        detail=text.strip(),
    )


def _gsp_assertion(text: str) -> KernelEvent | None:
    """The GSP failure an RM assertion's message names, else None: 580 asserts "Assertion failed:
    Back to back GSP RPC timeout detected! GPU marked for reset @ kernel_gsp.c:2387", a message in
    place of a condition, and that family's advice (reset the GPU) is the one to give. Only the
    message is read: the file it names (kernel_gsp.c) says nothing."""
    cond = _ASSERT_COND.search(text)
    said = cond.group("cond") if cond else ""
    gsp = classify_gsp(said) if may_be_gsp(said) else None
    if gsp is None or gsp.code == "error":
        return None
    return replace(gsp, device=gpu_device(text), detail=text.strip())


def _classify_rc_watchdog(text: str) -> KernelEvent | None:
    m = _RC_WATCHDOG.search(text)
    if m is None:
        return None
    advice, _ = xid_advice(_RC_WATCHDOG_XID, "")
    after = f" for {m.group('secs')} s" if m.group("secs") else ""
    return make_event(
        "xid",
        advice,
        code=str(_RC_WATCHDOG_XID),
        device=gpu_device(text),
        xid=_RC_WATCHDOG_XID,
        meaning=f"GPU probably locked: the driver's watchdog channel made no progress{after}; "
        "the driver resets the stuck channel (Xid 8)",
        detail=text.strip(),
    )


def classify_nvidia(text: str) -> KernelEvent | None:
    """The NVIDIA driver event in one message, or None."""
    if "Xid" in text:
        event = _classify_sxid(text) if "SXid" in text else _classify_xid(text)
        if event is not None:
            return event
    if "fallen off the bus" in text:
        m = _BUS_OFF_PCI.search(text)
        pci = m.group("pci").lower() if m else None
        return make_event(
            "bus_off",
            code="79",
            device=device_key(pci),
            pci=pci,
            meaning="GPU has fallen off the bus",
            detail=text.strip(),
        )
    if "probably locked" in text:
        return _classify_rc_watchdog(text)
    if "NV_ERR_" in text or "Failed" in text:
        event = _classify_nv_err(text)
        if event is not None:
            if event.code == "assertion":  # no status: its message may name a GSP failure
                return _gsp_assertion(text) or event
            return event
    if ("NVRM" in text or "@ pc:0x" in text) and may_be_gsp(text):
        event = classify_gsp(text)
        if event is not None:
            return event
    # UVM's own messages carry its "nvidia-uvm:" tag; a bare mention is someone else's line
    # ("Process '/sbin/modprobe nvidia-uvm' failed": udev, not a UVM error)
    if "nvidia-uvm:" in text and not any(b in text for b in _UVM_BENIGN) and _UVM_BAD.search(text):
        return make_event("uvm", meaning="nvidia-uvm error", detail=text.strip())
    failed = _FAILED.search(text) if "status=" in text else None
    if failed is not None and _GPU_LOST_STATUS.search(text, failed.end()):
        return make_event(
            "nv_err",
            _NV_ERR_ADVICE[_GPU_LOST],
            code=_GPU_LOST,
            device=gpu_device(text),
            nv_err=_GPU_LOST,
            meaning="a driver call failed: the GPU is lost",
            detail=text.strip(),
        )
    return None
