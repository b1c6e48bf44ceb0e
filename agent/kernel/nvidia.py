"""NVIDIA driver messages: Xid (every address form, the NVLink sub-fields, Xid 154's recovery
action), SXid (NVSwitch), GPU off the bus, ``NV_ERR_*`` and RM assertions, GSP failure families
and nvidia-uvm errors. Input is a message found by ``prefix.kernel_message``.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event
from agent.kernel.nvlink import NVLINK_XIDS, decode_nvlink
from agent.kernel.xid_catalog import FATAL_ACTIONS, xid_info, xid_meaning

_BDF = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?"
# "Xid (PCI:0000:01:00)", "(0000:01:00)", "(01:00)"; MIG adds " GPU-I:01 GPU-CI:00"
_XID = re.compile(
    rf"\bXid \((?:PCI:)?(?P<pci>{_BDF})(?P<mig>[^)]*)\):\s*(?P<code>\d+)(?:,\s*(?P<rest>.*))?"
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
_NVRM_FUNC = re.compile(r"NVRM:?\s+(?:GPU(?P<gpu>\d+)\s+)?(?P<func>[A-Za-z_]\w*):\s")
_GPU_PCI = re.compile(rf"NVRM: GPU (?P<pci>{_BDF}):")
_GPU_INDEX = re.compile(r"NVRM:?\s+GPU(?P<gpu>\d+)\s")
_FAILURE = re.compile(
    r"(?i)\b(?:fail(?:ed|ure|s)?|error|errors|timed ?out|timeout|cannot|unable|unexpected|"
    r"bad state|exception|panic|halt(?:ed)?)\b"
)
# GSP failure families, most specific first: (family, pattern, needs a failure word).
_GSP_FAMILIES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("crashcat", re.compile(r"\b(?:exception|panic|timeout)\b[^@]*@ pc:0x|CrashCat"), False),
    ("heartbeat", re.compile(r"(?i)heartbeat timed out"), False),
    (
        "rpc_timeout",
        re.compile(
            r"GSP Timeout\b|Timeout after \d+s of waiting for RPC|(?i:rpc\w* timed ?out)|"
            r"timed out waiting for RPC"
        ),
        False,
    ),
    (
        "rpc_error",
        re.compile(r"GSP RPC error|waiting for RPC response from GSP|_issueRpcAndWait|RpcRecvPoll"),
        True,
    ),
    ("pmu_halt", re.compile(r"PMU (?:has )?halt"), False),
    ("rc_critical", re.compile(r"RC all (?:\w+ )?channels for critical error"), False),
    (
        "init",
        re.compile(
            r"(?i:cannot initialize GSP)|RmInitAdapter failed|gsp\w*\.bin\b.*\bfailed|"
            r"GSP firmware\b.*\bfail"
        ),
        False,
    ),
    (
        "boot",
        re.compile(r"WPR2|_?kgspBoot\w*|(?i:GFW[_ ]?boot)|\bboot(?:ing)? GSP|GSP-RM\b.*\bboot"),
        True,
    ),
)
_GSP_FUNC = re.compile(r"(?i)^_?kgsp")
_GSP_ANY = re.compile(
    r"GSP.*(?:[Tt]imeout|[Ee]rror|exception|[Ff]ail)|(?:[Tt]imeout|[Ff]ail|sanity check).*GSP"
)
_UVM_BAD = re.compile(r"[Ee]rror|[Ff]atal|[Ff]ault|[Ff]ail|[Tt]imeout|ECC|[Aa]ssert")
_UVM_BENIGN = ("Loaded the UVM driver", "Unloaded the UVM driver")


def device_key(pci: str | None) -> str | None:
    """One spelling per GPU: ``0000:bb:dd`` (domain padded, function dropped)."""
    if not pci:
        return None
    pci = pci.lower()
    if pci.count(":") == 1:
        pci = "0000:" + pci
    return pci[:-2] if pci[-2:-1] == "." else pci


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
    pci = m.group("pci").lower()
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


def _classify_sxid(text: str) -> KernelEvent | None:
    m = _SXID.search(text)
    if m is None:
        return None
    rest = (m.group("rest") or "").strip()
    verdict = rest.split(",", 1)[0].strip().lower()
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


def _gpu_device(text: str) -> str | None:
    m = _GPU_INDEX.search(text)
    if m:
        return f"GPU{m.group('gpu')}"
    p = _GPU_PCI.search(text)
    return device_key(p.group("pci")) if p else None


def _may_be_gsp(t: str) -> bool:
    """Whether any GSP family's pattern (or the generic GSP error) could match: every one needs
    one of these words. Spelled out: cheaper than a loop or a regex on ordinary NVRM chatter."""
    return (
        "GSP" in t
        or "gsp" in t
        or "RPC" in t
        or "Rpc" in t
        or "rpc" in t
        or "pc:0x" in t
        or "CrashCat" in t
        or "eartbeat" in t
        or "PMU" in t
        or "RC all" in t
        or "RmInit" in t
        or "WPR2" in t
        or "GFW" in t
        or "Gfw" in t
    )


def _classify_gsp(text: str) -> KernelEvent | None:
    family = next(
        (
            name
            for name, pattern, needs_failure in _GSP_FAMILIES
            if pattern.search(text) and (not needs_failure or _FAILURE.search(text))
        ),
        None,
    )
    if family is None:
        func = _NVRM_FUNC.search(text)
        in_client = func is not None and _GSP_FUNC.match(func.group("func")) is not None
        if not ((in_client and _FAILURE.search(text)) or ("GSP" in text and _GSP_ANY.search(text))):
            return None
        family = "error"
    return make_event(
        "gsp",
        ("error", "reset_gpu") if family == "error" else None,
        code=family,
        device=_gpu_device(text),
        meaning=GSP_MEANINGS[family],
        detail=text.strip(),
    )


GSP_MEANINGS = {
    "crashcat": "GPU firmware crash report (CrashCat): a GSP/SEC2/PMU task trapped or panicked",
    "heartbeat": "GSP firmware heartbeat lost: the GPU System Processor stopped responding",
    "rpc_timeout": "an RPC to the GSP firmware timed out",
    "rpc_error": "RPCs to the GSP firmware are failing",
    "pmu_halt": "the GPU's PMU micro-controller halted",
    "rc_critical": "the driver reset every channel after a critical GPU error",
    "init": "the driver could not initialise the GPU's GSP firmware",
    "boot": "the GSP firmware failed to boot (the GPU is likely in a bad state)",
    "error": "the GSP firmware client reported an error",
}


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
        ("error", "restart_app") if name == "NV_ERR_NO_MEMORY" else None,
        code=name or "assertion",
        device=_gpu_device(text),
        nv_err=name,
        meaning=desc.group("desc").strip() if desc else None,
        call_site=f"{site.group('func')} @ {site.group('file')}" if site else None,
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
    if "NV_ERR_" in text or "Failed" in text:
        event = _classify_nv_err(text)
        if event is not None:
            return event
    if ("NVRM" in text or "@ pc:0x" in text) and _may_be_gsp(text):
        event = _classify_gsp(text)
        if event is not None:
            return event
    if "nvidia-uvm" in text and not any(b in text for b in _UVM_BENIGN) and _UVM_BAD.search(text):
        return make_event("uvm", meaning="nvidia-uvm error", detail=text.strip())
    return None
