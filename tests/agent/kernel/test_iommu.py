"""IOMMU faults (``iommu``): each IOMMU's fault line is one event carrying its code, device and
address; the lines around it and boot chatter are none. Lines are real (their files under
``tests/fixtures/real/kernel`` name the sources) unless marked synthetic."""

from __future__ import annotations

import pytest

from agent.kernel.classify import GPU_FAULT_KINDS, classify_kernel_line
from tests.support.timing import fastest

# (line, code, device, address in the meaning)
FAULTS = [
    # Arm SMMUv3, every kernel: the raw record's header names no device
    (
        "arm-smmu-v3 arm-smmu-v3.1.auto: event 0x10 received:",
        "F_TRANSLATION",
        None,
        None,
    ),
    # Arm SMMUv3, newer kernels: the decoded line names the client (an ACPI SMMU, PCI domain 1)
    (
        "[   70.386109] arm-smmu-v3 arm-smmu-v3.5.auto: event: F_TRANSLATION client: 0001:06:00.0 "
        "sid: 0x20600 ssid: 0x0 iova: 0xff9bc000 ipa: 0x0",
        "F_TRANSLATION",
        "0001:06:00.0",
        "0xff9bc000",
    ),
    # Arm SMMU v2: the stream ID is cbfrsynra, told apart by the SMMU that saw it
    (
        "[    0.561287] arm-smmu 15000000.iommu: Unhandled context fault: fsr=0x402, "
        "iova=0x9c4b9000, fsynr=0x7c0020, cbfrsynra=0x800, cb=7",
        "context_fault",
        "15000000.iommu sid 0x800",
        "0x9c4b9000",
    ),
    # a downstream Qualcomm kernel: other field order, no stream ID
    (
        "[ 3440.122844] arm-smmu 15000000.apps-smmu: Unhandled context fault: iova=0xa09d70c8, "
        "fsr=0x40000402, fsynr=0x300003, cb=5",
        "context_fault",
        None,
        "0xa09d70c8",
    ),
    # Intel VT-d, 6.x scalable mode
    (
        "[ 6611.206544] DMAR: [DMA Read NO_PASID] Request device [03:00.0] fault addr 0x100000 "
        "[fault reason 0x71] SM: Present bit in first-level paging entry is clear",
        "reason_0x71",
        "03:00.0",
        "0x100000",
    ),
    # 5.14's "0x"-prefixed device, a journal prefix
    (
        "[    0.960486] kernel: DMAR: [DMA Read NO_PASID] Request device [0x00:0x02.0] fault addr "
        "0x7c346000 [fault reason 0x06] PTE Read access is not set",
        "reason_0x06",
        "00:02.0",
        "0x7c346000",
    ),
    # older 5.x: PASID ffffffff, the reason in decimal, the address without 0x
    (
        "[  228.845965] DMAR: [DMA Write] Request device [00:02.0] PASID ffffffff fault addr 0 "
        "[fault reason 02] Present bit in context entry is clear",
        "reason_0x02",
        "00:02.0",
        "0x0",
    ),
    # 3.x: the reason comes on the next line, so this one has no code
    (
        "2014-04-25T09:37:53.595431+01:00 kvmhost kernel:     8.490171] dmar: DMAR:[DMA Read] "
        "Request device [01:00.0] fault addr 41a6aa000",
        None,
        "01:00.0",
        "0x41a6aa000",
    ),
    # AMD-Vi: the device in the prefix, in device=, with its PCI segment (6.x)
    (
        "[   10.919607] nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 "
        "address=0xfc189000 flags=0x0000]",
        "IO_PAGE_FAULT",
        "0000:01:00.0",
        "0xfc189000",
    ),
    (
        "[   73.500538] iommu ivhd0: AMD-Vi: Event logged [IOTLB_INV_TIMEOUT device=06:00.0 "
        "address=0x1001e4600]",
        "IOTLB_INV_TIMEOUT",
        "06:00.0",
        "0x1001e4600",
    ),
    # https://lore.kernel.org/all/20260323134511.126623444@linuxfoundation.org/ (mail-indented)
    (
        "  iommu ivhd3: AMD-Vi: Event logged [ILLEGAL_DEV_TABLE_ENTRY device=0000:43:00.0 "
        "pasid=0x00000 address=0x3737b01000 flags=0x0020]",
        "ILLEGAL_DEV_TABLE_ENTRY",
        "0000:43:00.0",
        "0x3737b01000",
    ),
    # older AMD-Vi: the bracket's content on a line of its own
    (
        "kernel: [  221.565929] IO_PAGE_FAULT device=05:00.0 domain=0x0012 "
        "address=0x00000000ff6101b0 flags=0x0070]",
        "IO_PAGE_FAULT",
        "05:00.0",
        "0x00000000ff6101b0",
    ),
]


@pytest.mark.parametrize(("line", "code", "device", "address"), FAULTS)
def test_each_iommus_fault_line_is_an_iommu_event(
    line: str, code: str | None, device: str | None, address: str | None
) -> None:
    event = classify_kernel_line(line)
    assert event is not None
    assert (event.kind, event.code, event.device) == ("iommu", code, device)
    assert (event.severity, event.action) == ("error", "none")
    assert event.meaning is not None and event.meaning.startswith("IOMMU fault")
    if address:
        assert f" at {address}:" in event.meaning
    assert event.detail is not None and event.detail in line  # the message, prefix removed


def test_a_pci_device_is_also_the_events_pci_address() -> None:
    [named, smmu] = [classify_kernel_line(FAULTS[i][0]) for i in (1, 2)]
    assert named is not None and named.pci == "0001:06:00.0"
    assert smmu is not None and smmu.pci is None  # a stream ID is no PCI address


def test_smmuv3_names_the_event_its_header_numbers() -> None:
    event = classify_kernel_line(FAULTS[0][0])
    assert event is not None and event.meaning is not None
    assert "event 0x10 F_TRANSLATION: no mapping for the address" in event.meaning


def test_smmuv3_stream_no_device_owns_is_its_stream_id() -> None:
    # synthetic: arm_smmu_dump_event's format for a stream no device was bound to
    event = classify_kernel_line(
        "arm-smmu-v3 arm-smmu-v3.0.auto: event: C_BAD_STREAMID client: (unassigned sid) sid: 0x300"
    )
    assert event is not None
    assert (event.code, event.device) == ("C_BAD_STREAMID", "arm-smmu-v3.0.auto sid 0x300")


def test_iommu_is_no_gpu_fault_of_its_own() -> None:
    # any PCI device can fault; the device says whether it was the GPU
    assert "iommu" not in GPU_FAULT_KINDS


@pytest.mark.parametrize(
    "line",
    [
        # the raw words after an SMMUv3 header, and the access line after a decoded one
        "[  131.475699] arm-smmu-v3 fc900000.iommu: \t0x0000210000000010",
        "arm-smmu-v3 arm-smmu-v3.1.auto:  0x0000790000000010",
        '[  106.589383] arm-smmu-v3 fc900000.iommu: unpriv data write s1 "Input address caused '
        'fault" stag: 0x0',
        # SMMU v2's decode lines and the rate limiter's count
        "[    0.561295] arm-smmu 15000000.iommu: FSR    = 00000402 [Format=2 TF], SID=0x800",
        "[    0.561303] arm-smmu 15000000.iommu: FSYNR0 = 007c0020 [S1CBNDX=124 PNU PLVL=0]",
        "arm_smmu_context_fault: 83 callbacks suppressed",
        "[ 3440.123012] arm-smmu 15000000.apps-smmu: Unhandled WLAN context fault! (BUG "
        "suppressed; awaiting SSR)",
        # VT-d: the status register line, 3.x's reason line, a blocked interrupt
        "[ 6611.206519] DMAR: DRHD: handling fault status reg 2",
        "2014-04-25T09:37:53.595431+01:00 kvmhost kernel:     8.490171] DMAR:[fault reason 01] "
        "Present bit in root entry is clear",
        "[  144.480629] dmar_fault: 893 callbacks suppressed",
        # https://lore.kernel.org/all/20210901124047.1615-1-adrianhuang0701@gmail.com/
        "  DMAR: [INTR-REMAP] Request device [0x00:0x00.5] fault index 0xa00 [fault reason "
        "0x25] Blocked a compatibility format interrupt request",
        # AMD-Vi: older kernels' bare opener, the command queue's own timeouts, a DTE dump line
        "kernel: [   13.134460] AMD-Vi: Event logged [",
        "[   72.645091] AMD-Vi: Completion-Wait loop timed out",
        "  iommu ivhd3: AMD-Vi: Control Reg : 0xc22000142148d",
        # boot chatter
        "[    1.609655] arm-smmu-v3 arm-smmu-v3.0.auto: ias 48-bit, oas 48-bit (features "
        "0x00020b25)",
        "[    0.173951] arm-smmu 12000000.iommu: probing hardware configuration...",
        "[    0.037393] DMAR: IOMMU enabled",
        "[    0.478075] DMAR-IR: Enabled IRQ remapping in xapic mode",
        "[    2.052762] AMD-Vi: Interrupt remapping enabled",
        "[    0.263517] AMD-Vi: AMD-Vi:   DEV_SELECT_RANGE_START  devid: 0000:c0:00.3 flags: 00",
        "[    0.261852] iommu: Default domain type: Translated ",
    ],
)
def test_lines_around_a_fault_and_boot_chatter_are_quiet(line: str) -> None:
    assert classify_kernel_line(line) is None


@pytest.mark.parametrize(
    "head, run, tail",
    [
        # the SMMU's name before "event:" and before "Unhandled context fault:" must not be
        # retried from every character of a long word (a dumped blob): that was quadratic,
        # 20 s for a 64 KiB line
        ("arm-smmu-v3 x: event ", "a", ""),
        ("arm-smmu 1.iommu: ", "a", " context fault"),
        # the decoded line's client, from every "event: ... client: " to the line's end
        ("arm-smmu-v3 x: ", "event: A client: x ", ""),
        # VT-d's access bracket, from every "[DMA Read" to the line's end
        ("DMAR: Request device [ ", "[DMA Read ", ""),
    ],
)
def test_a_long_line_classifies_in_linear_time(head: str, run: str, tail: str) -> None:
    # Against a line as long whose runs are short (no wall-clock limit: the machine is shared):
    # linear, the two cost alike; quadratic, the long runs cost hundreds of times more.
    def cost(body: str) -> float:
        line = head + body + tail
        return fastest(lambda: classify_kernel_line(line))

    length = 10_000
    short = ("b " * length)[:length]
    assert cost((run * length)[:length]) < 50 * cost(short)
