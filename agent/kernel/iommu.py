"""IOMMU faults: an IOMMU refused a device's DMA (the GPU or another PCI device touched memory it
was not mapped to). On GB10 the GPU sits behind an Arm SMMUv3, so its memory faults land here,
next to the driver's own NVRM errors.

One event per fault record, on the line that names it:

- Arm SMMUv3: ``event 0x10 received:`` on every kernel (the four raw ``0x...`` words after it
  are no event: the stream ID is inside them, out of reach of a line read alone). Newer kernels
  add a decoded ``event: F_TRANSLATION client: <dev> sid: ... iova: ...`` line, an event on the
  device it names: with the header's (no device) one fault is two events, as the RC watchdog
  line and its Xid 8 are.
- Arm SMMU v2 (Qualcomm, NVIDIA Tegra, NXP): ``Unhandled context fault: fsr=..., iova=...,
  cbfrsynra=<sid>, cb=N``; the ``FSR``/``FSYNR0``/``SID=`` lines after it restate it.
- Intel VT-d: ``DMAR: [DMA Read ...] Request device [bb:dd.f] ... fault addr A [fault reason
  R] why``. The ``DRHD: handling fault status reg N`` line before it announces the records (or
  stands for the ones a rate limit dropped) and 3.x's ``DMAR:[fault reason NN]`` second line
  restates it. Interrupt-remapping faults (``[INTR-REMAP]``) are blocked interrupts, not DMA.
- AMD-Vi: ``Event logged [IO_PAGE_FAULT device=... address=...]`` and its other events
  (``ILLEGAL_DEV_TABLE_ENTRY``, ``IOTLB_INV_TIMEOUT``, ...), the device in ``device=`` or in the
  line's prefix; older kernels printed the bracket's content on a line of its own.

The code is the IOMMU's own name for the fault (SMMUv3's ``F_TRANSLATION``, ``context_fault``,
VT-d's ``reason_0x06``, AMD's ``IO_PAGE_FAULT``), the device its PCI address as printed or its
stream ID; the address is in the meaning, so a storm at many addresses is one occurrence.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event

# Each fault line holds one of these (older AMD-Vi's split line: " device=" after the event name).
NEEDLES = ("smmu", "context fault", "Request device [", "Event logged [", " device=")

_V3_HEADER = re.compile(r"\bevent 0x(?P<id>[0-9a-fA-F]{1,2}) received:")
# The SMMU's name only from the start of a word, and a client one word or "(unassigned sid)":
# else a long word (a dumped blob) is retried from each of its characters, quadratic.
_SMMU_NAME = r"(?:(?<![\w.@-])(?P<smmu>[\w.@-]+): )?"
_V3_DECODED = re.compile(
    _SMMU_NAME + r"event: (?P<name>[A-Z_]+) client: (?P<client>\([^()]*\)|\S+) "
    r"sid: (?P<sid>0x[0-9a-f]+)(?: ssid: 0x[0-9a-f]+ iova: (?P<iova>0x[0-9a-f]+))?"
)
# SMMUv3 event IDs and their names as the kernel prints them (arm-smmu-v3.h, the SMMUv3 spec)
V3_EVENTS = {
    0x02: ("C_BAD_STREAMID", "unknown stream ID"),
    0x03: ("F_STE_FETCH", "stream table entry unreadable"),
    0x04: ("C_BAD_STE", "invalid stream table entry"),
    0x06: ("F_STREAM_DISABLED", "stream disabled"),
    0x08: ("C_BAD_SUBSTREAMID", "unknown substream ID"),
    0x09: ("F_CD_FETCH", "context descriptor unreadable"),
    0x0A: ("C_BAD_CD", "invalid context descriptor"),
    0x10: ("F_TRANSLATION", "no mapping for the address"),
    0x11: ("F_ADDR_SIZE", "address out of range"),
    0x12: ("F_ACCESS", "access flag clear"),
    0x13: ("F_PERMISSION", "mapping forbids the access"),
    0x25: ("F_VMS_FETCH", "VMS unreadable"),
}
_V3_WORDS = {name: words for name, words in V3_EVENTS.values()}
# "arm-smmu 15000000.iommu: Unhandled context fault: fsr=0x402, iova=0x9c4b9000, ...": kernel
# versions and vendor trees print other orders and sets, older ones no cbfrsynra (the stream ID)
_V2 = re.compile(_SMMU_NAME + r"[Uu]nhandled context fault: (?P<fields>.*)")
_V2_IOVA = re.compile(r"\biova=(?P<iova>0x[0-9a-f]+)")
_V2_SID = re.compile(r"\bcbfrsynra=(?P<sid>0x[0-9a-f]+)")
# "[DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] ..."
_DMAR = re.compile(
    r"\[(?P<access>DMA (?:Read|Write))[^\]]{0,40}\] Request device \[(?P<dev>[0-9a-fx:.]+)\]"
    r"(?: PASID \w+)? fault addr (?P<addr>(?:0x)?[0-9a-f]+)"
    r"(?:\s*\[fault reason (?P<reason>0x[0-9a-f]+|\d+)\] ?(?P<why>.*))?"
)
_AMD = re.compile(
    r"(?:Event logged \[|^)(?P<name>[A-Z][A-Z_]{4,}) (?P<fields>(?:device|domain)=[^\]]*)"
)
AMD_WORDS = {
    "IO_PAGE_FAULT": "no mapping, or one that forbids the access",
    "ILLEGAL_DEV_TABLE_ENTRY": "the device's table entry is invalid",
    "INVALID_DEVICE_REQUEST": "a request the device may not make",
    "IOTLB_INV_TIMEOUT": "the device did not confirm an invalidation of its address cache",
}
_AMD_DEVICE = re.compile(r"\bdevice=(?P<dev>[0-9a-f:.]+)")
_AMD_ADDRESS = re.compile(r"\baddress=(?P<addr>0x[0-9a-f]+)")
_PCI_PREFIX = re.compile(r"(?P<dev>\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): AMD-Vi: ")
_BDF = re.compile(r"(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def _event(
    text: str, code: str | None, device: str | None, what: str, address: str | None
) -> KernelEvent:
    pci = device if device and _BDF.fullmatch(device) else None
    on = f" on {device}" if device else ""
    at = f" at {address}" if address else ""
    return make_event(
        "iommu",
        code=code,
        device=device,
        pci=pci,
        meaning=f"IOMMU fault{on}{at}: {what}",
        detail=text.strip(),
    )


def _sid(smmu: str | None, sid: str) -> str:
    """A stream ID as a device: IDs are per SMMU, so the SMMU's name (when the line has it)
    keeps two SMMUs' streams apart."""
    return f"{smmu} sid {sid}" if smmu else f"sid {sid}"


def _smmu_v3(text: str) -> KernelEvent | None:
    m = _V3_DECODED.search(text)
    if m:
        name, client = m.group("name"), m.group("client")
        # "(unassigned sid)": no device the kernel knows of sent it
        device = _sid(m.group("smmu"), m.group("sid")) if client.startswith("(") else client
        words = _V3_WORDS.get(name)
        return _event(
            text,
            name,
            device,
            f"SMMUv3 {name}" + (f": {words}" if words else ""),
            m.group("iova"),
        )
    m = _V3_HEADER.search(text)
    if m is None:
        return None
    name, words = V3_EVENTS.get(int(m.group("id"), 16), ("UNKNOWN", "unknown event"))
    return _event(
        text, name, None, f"SMMUv3 event 0x{int(m.group('id'), 16):02x} {name}: {words}", None
    )


def _smmu_v2(text: str) -> KernelEvent | None:
    m = _V2.search(text)
    if m is None:
        return None
    iova, sid = _V2_IOVA.search(m.group("fields")), _V2_SID.search(m.group("fields"))
    return _event(
        text,
        "context_fault",
        _sid(m.group("smmu"), sid.group("sid")) if sid else None,
        "SMMU context fault: no mapping, or one that forbids the access",
        iova.group("iova") if iova else None,
    )


def _dmar(text: str) -> KernelEvent | None:
    m = _DMAR.search(text)
    if m is None:
        return None
    reason, why = m.group("reason"), (m.group("why") or "").strip()
    code = None
    if reason:
        number = int(reason, 16) if reason.startswith("0x") else int(reason)
        code = f"reason_0x{number:02x}"
    address = m.group("addr")
    return _event(
        text,
        code,
        m.group("dev").replace("0x", "").lower(),
        f"VT-d {m.group('access')} refused" + (f": {why}" if why else ""),
        address if address.startswith("0x") else f"0x{address}",
    )


def _amd(text: str) -> KernelEvent | None:
    m = _AMD.search(text)
    if m is None:
        return None
    name = m.group("name")
    dev = _AMD_DEVICE.search(m.group("fields")) or _PCI_PREFIX.search(text)
    addr = _AMD_ADDRESS.search(m.group("fields"))
    device = dev.group("dev").lower() if dev else None
    return _event(
        text,
        name,
        device,
        f"AMD-Vi {name}" + (f": {AMD_WORDS[name]}" if name in AMD_WORDS else ""),
        addr.group("addr") if addr else None,
    )


def classify_iommu(text: str) -> KernelEvent | None:
    """The IOMMU fault a message reports, else None (boot chatter, a record's other lines)."""
    if "smmu" in text and "event" in text:
        event = _smmu_v3(text)
        if event is not None:
            return event
    if "context fault" in text:
        return _smmu_v2(text)
    if "Request device [" in text:
        return _dmar(text)
    if "device=" in text or "Event logged [" in text:
        return _amd(text)
    return None
