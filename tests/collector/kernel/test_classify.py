"""Kernel-line classification against real driver/kernel formats (580.x, 595.x, older)."""

from __future__ import annotations

import pytest

from collector.kernel.classify import GPU_FAULT_KINDS, classify_kernel_line
from collector.kernel.xid_table import XID_TABLE, xid_meaning

NV_ERR_580 = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)


def test_nv_err_no_memory_carries_name_and_call_site() -> None:
    event = classify_kernel_line(NV_ERR_580)
    assert event is not None
    assert event.kind == "nv_err"
    assert event.nv_err == "NV_ERR_NO_MEMORY"
    assert event.call_site == "_memdescAllocInternal @ mem_desc.c:1359"
    assert event.meaning == "Out of memory"


def test_nv_err_call_site_line_is_not_hard_coded() -> None:
    event = classify_kernel_line(NV_ERR_580.replace("1359", "1336"))  # 595.45.04
    assert event is not None and event.call_site == "_memdescAllocInternal @ mem_desc.c:1336"


def test_xid_with_process_context() -> None:
    event = classify_kernel_line(
        "NVRM: Xid (PCI:000f:01:00): 119, pid=3849, name=KMS thread, Timeout after 45s of "
        "waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) "
        "sequence 1234 (0x20800a4c 0x4)."
    )
    assert event is not None
    assert (event.kind, event.xid, event.pci, event.pid, event.process) == (
        "xid",
        119,
        "000f:01:00",
        3849,
        "KMS thread",
    )
    assert event.meaning == XID_TABLE[119].meaning
    assert event.detail is not None and event.detail.startswith("Timeout after 45s")


@pytest.mark.parametrize(
    ("line", "code", "pid", "process"),
    [
        (
            "NVRM: Xid (PCI:000f:01:00): 13, Graphics SM Warp Exception: Illegal Instruction "
            "Parameter",
            13,
            None,
            None,
        ),
        ("NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.", 79, None, None),
        ("NVRM: Xid (PCI:0000:2b:00): 79, pid=0, GPU has fallen off the bus.", 79, 0, None),
        (
            "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable "
            "double bit error (DBE) has been detected",
            48,
            None,
            None,
        ),
        ("NVRM: Xid (0000:01:00): 43, Ch 00000010", 43, None, None),
        (
            "NVRM: Xid (PCI:0000:65:00 GPU-I:01 GPU-CI:00): 31, pid=77, name=python3, Ch 08",
            31,
            77,
            "python3",
        ),
        (
            "NVRM: Xid (PCI:000f:01:00): 45, pid=9111, name=python, Ch 00000008, "
            "caused by previous Xid 13",
            45,
            9111,
            "python",
        ),
    ],
)
def test_xid_forms_across_driver_versions(
    line: str, code: int, pid: int | None, process: str | None
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and event.kind == "xid"
    assert (event.xid, event.pid, event.process) == (code, pid, process)
    assert event.meaning == xid_meaning(code)


def test_undocumented_xid_still_an_event() -> None:
    event = classify_kernel_line("NVRM: Xid (PCI:0000:01:00): 999, something new")
    assert event is not None and event.xid == 999 and "999" in (event.meaning or "")


def test_bus_off_forms() -> None:
    event = classify_kernel_line("NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.")
    assert event is not None and (event.kind, event.pci) == ("bus_off", "0000:2b:00.0")
    probe = classify_kernel_line("NVRM: fallen off the bus and is not responding to commands.")
    assert probe is not None and probe.kind == "bus_off"


@pytest.mark.parametrize(
    "line",
    [
        "NVRM: ********************************* GSP Timeout **********************************",
        "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:000f:01:00 (printing 1 of "
        "every 30).  The GPU likely needs to be reset.",
        "NVRM: GPU0 sanity check failed 0xffff waiting for RPC response from GSP.",
    ],
)
def test_gsp_lines(line: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None and event.kind == "gsp"


def test_uvm_error_but_not_uvm_banner() -> None:
    event = classify_kernel_line("nvidia-uvm: Encountered a global fatal error: Unknown error")
    assert event is not None and event.kind == "uvm"
    assert (
        classify_kernel_line("nvidia-uvm: Loaded the UVM driver, major device number 509.") is None
    )


@pytest.mark.parametrize(
    "line",
    [
        "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.126.20  Release Build  "
        "(dvs-builder@U22-I3-AE18-23-3)  Wed Jan  7 22:35:29 UTC 2026",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024",
        "nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for aarch64  "
        "580.126.20  Release Build  (dvs-builder@U22-I3-AE18-23-3)",
        "nvidia: module license 'NVIDIA' taints kernel.",
        "NVRM: GPU at PCI:000f:01:00: GPU-5a1c3f1e-0b52-2c6d-8a3f-1f2b3c4d5e6f",
        "NVRM: GPU Board Serial Number: 1234567890123",
        "NVRM: GPU0 RPC history (CPU -> GSP):",
        "NVRM: Note: Please also check logs above.",
        "nvidia_uvm: module uses symbols nvUvmInterfaceDisableAccessCntr from proprietary "
        "module nvidia",
        "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
        "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.",
        "oom_reaper: reaped process 4121 (python3), now anon-rss:0kB, file-rss:0kB",
        "",
    ],
)
def test_benign_lines_are_not_events(line: str) -> None:
    assert classify_kernel_line(line) is None


def test_generic_freeze_precursors() -> None:
    soft = classify_kernel_line(
        "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [VLLM::EngineCor:4121]"
    )
    assert soft is not None and (soft.kind, soft.pid, soft.process) == (
        "soft_lockup",
        4121,
        "VLLM::EngineCor",
    )
    hung = classify_kernel_line("INFO: task kworker/u24:3:233 blocked for more than 122 seconds.")
    assert hung is not None and (hung.kind, hung.pid, hung.process) == (
        "hung_task",
        233,
        "kworker/u24:3",
    )
    rcu = classify_kernel_line("rcu: INFO: rcu_sched self-detected stall on CPU")
    assert rcu is not None and rcu.kind == "rcu_stall"
    oom = classify_kernel_line(
        "Out of memory: Killed process 4121 (python3) total-vm:98123456kB, anon-rss:90123456kB"
    )
    assert oom is not None and (oom.kind, oom.pid, oom.process) == ("oom_kill", 4121, "python3")
    alloc = classify_kernel_line(
        "python3: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), "
        "nodemask=(null),cpuset=/,mems_allowed=0"
    )
    assert alloc is not None and (alloc.kind, alloc.process) == ("alloc_failure", "python3")


def test_gpu_fault_kinds() -> None:
    assert {"xid", "nv_err", "gsp", "uvm", "bus_off"} == GPU_FAULT_KINDS
