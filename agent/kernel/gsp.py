"""GSP firmware failures in NVIDIA driver lines, by family: CrashCat crash reports, lost
heartbeats, RPC timeouts and errors, PMU halts, critical-error channel resets, init and boot
failures, else a GSP client's error. Called by ``nvidia`` on NVRM (and CrashCat ``@ pc:0x``)
lines that ``may_be_gsp``.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event
from agent.kernel.nvdevice import gpu_device

_NVRM_FUNC = re.compile(r"NVRM:?\s+(?:GPU(?P<gpu>\d+)\s+)?(?P<func>[A-Za-z_]\w*):\s")
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
            r"timed out waiting for RPC|GSP RPC timeout\b"
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
            r"GSP firmware\b.*\bfail|RmInitNvDevice: \W*Cannot initialize"
        ),
        False,
    ),
    (
        "boot",
        # Hopper+ boot GSP-RM through the FSP: "FSP command timed out", "Timed out waiting for
        # FSP command queue to be empty", 590+: "... FSP queues to be empty" (the command dump
        # after them has no failure word); Turing+ load it with the Booter ucode ("Booter failed
        # with non-zero error code", not "skipping executing Booter Unload") after FWSEC set up
        # the WPR2 region ("failed to execute FWSEC for FRTS: FRTS error code 0xbe"); "cannot
        # bootstrap riscv/gsp": the GSP's own core did not start
        re.compile(
            r"WPR2|_?kgspBoot\w*|(?i:GFW[_ ]?boot)|\bboot(?:ing)? GSP|GSP-RM\b.*\bboot|"
            r"\bFSP (?:command|queues)\b|\bBooter\b|\bFWSEC\b|\bbootstrap riscv"
        ),
        True,
    ),
)
_GSP_FUNC = re.compile(r"(?i)^_?kgsp")
_GSP_ANY = re.compile(
    r"GSP.*(?:[Tt]imeout|[Ee]rror|exception|[Ff]ail)|(?:[Tt]imeout|[Ff]ail|sanity check).*GSP"
)


def may_be_gsp(t: str) -> bool:
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
        or "FSP" in t
        or "Booter" in t
        or "FWSEC" in t
    )


def classify_gsp(text: str) -> KernelEvent | None:
    """The GSP failure family a driver line reports, else None."""
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
        device=gpu_device(text),
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
