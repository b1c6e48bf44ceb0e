"""Kernel-line classification of driver/kernel formats (580.x, 595.x, older): the fields each
kind carries, with their severity and action. Scores on real logs: ``test_real_corpus``."""

from __future__ import annotations

import pytest

from agent.kernel.classify import GPU_FAULT_KINDS, classify_kernel_line
from agent.kernel.xid_catalog import xid_info, xid_meaning
from tests.support.timing import fastest

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


def test_nv_err_named_in_an_asserted_condition_is_not_the_error() -> None:
    # NV_ASSERT prints its condition: the status it names is what was allowed, not what failed
    event = classify_kernel_line(
        "NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || "
        "(status == NV_ERR_GPU_IN_FULLCHIP_RESET) @ rs_client.c:844"
    )
    assert event is not None
    assert (event.kind, event.code, event.nv_err, event.device) == (
        "nv_err",
        "assertion",
        None,
        "GPU0",
    )


def test_nv_err_named_in_a_checked_condition_is_not_the_error() -> None:
    event = classify_kernel_line(
        "NVRM: GPU0 nvCheckFailedNoLog: Check failed: (status == NV_OK) || "
        "(status == NV_ERR_GPU_IN_FULLCHIP_RESET) @ gpu_user_shared_data.c:503"
    )
    assert event is not None and (event.kind, event.code) == ("nv_err", "assertion")


def test_nv_err_status_is_the_bracketed_name() -> None:
    event = classify_kernel_line(
        "NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] "
        "(0x0000000F) returned from rmStatus @ kernel_ce_gv100.c:106"
    )
    assert event is not None
    assert (event.code, event.meaning) == ("NV_ERR_GPU_IS_LOST", "GPU lost from the bus")


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
    info = xid_info(119)
    assert info is not None and event.meaning == info.meaning
    assert (event.code, event.device, event.severity, event.action) == (
        "119",
        "000f:01:00",
        "fatal",
        "reset_gpu",
    )
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
            "NVRM: Xid (01:00): 13, 0001 00000000 0000a097 00001b0c 00000002 00000000",
            13,
            None,
            None,
        ),
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
    assert event.device is not None and event.device.count(":") == 2


def test_undocumented_xid_still_an_event() -> None:
    event = classify_kernel_line("NVRM: Xid (PCI:0000:01:00): 999, something new")
    assert event is not None and event.xid == 999 and "999" in (event.meaning or "")
    assert (event.severity, event.action) == ("error", "none")


@pytest.mark.parametrize(
    ("code", "severity", "action"),
    [
        (13, "error", "restart_app"),
        (31, "error", "restart_app"),
        (43, "warning", "none"),
        (48, "fatal", "reset_gpu"),
        (63, "warning", "none"),
        (79, "fatal", "reboot"),
        (94, "error", "restart_app"),
        (95, "fatal", "reset_gpu"),
        (120, "fatal", "reset_gpu"),
        (54, "fatal", "inspect_hardware"),
        (2, "warning", "none"),  # unused on current GPUs
    ],
)
def test_each_xid_gets_the_catalog_advice(code: int, severity: str, action: str) -> None:
    event = classify_kernel_line(f"NVRM: Xid (PCI:0000:3b:00): {code}, pid=7, name=x, detail")
    assert event is not None and (event.severity, event.action) == (severity, action)


def test_the_rc_watchdogs_locked_gpu_is_the_xid_8_it_resets() -> None:
    # Real (llama.cpp #27102): the watchdog names no GPU; the Xid 8 after it does.
    event = classify_kernel_line(
        "aug 16 23:01:35 kernel: NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably locked!  "
        "Notify Timeout Seconds: 7"
    )
    xid_8 = classify_kernel_line(
        "NVRM: Xid (PCI:0000:01:00): 8, pid=709378, name=llama-server, channel 0x00000027"
    )
    assert event is not None and xid_8 is not None
    assert (event.kind, event.code, event.xid, event.device) == ("xid", "8", 8, None)
    assert (event.severity, event.action) == (xid_8.severity, xid_8.action)
    assert "probably locked" in (event.meaning or "") and "7 s" in (event.meaning or "")
    # Its earlier stage (kernel_rc_watchdog_callback.c), which the driver says may be a GPU
    # merely busy during a power event or modeset
    assert (
        classify_kernel_line(
            "NVRM: krcWatchdog_IMPL: RC watchdog: GPU is possibly locked. Attempting to "
            "restart watchdog."
        )
        is None
    )


def test_xid_154_takes_the_action_it_names() -> None:
    reset = classify_kernel_line(
        "NVRM: Xid (PCI:000f:01:00): 154, GPU recovery action changed from 0x0 (None) to "
        "0x1 (GPU Reset Required)"
    )
    reboot = classify_kernel_line(
        "NVRM: Xid (PCI:000f:01:00): 154, GPU recovery action changed from 0x0 (None) to "
        "0x2 (Node Reboot Required)"
    )
    cleared = classify_kernel_line(
        "NVRM: Xid (PCI:000f:01:00): 154, GPU recovery action changed from 0x1 "
        "(GPU Reset Required) to 0x0 (None)"
    )
    assert reset is not None and (reset.severity, reset.action) == ("fatal", "reset_gpu")
    assert reboot is not None and reboot.action == "reboot"
    assert cleared is not None and (cleared.severity, cleared.action) == ("info", "none")


@pytest.mark.parametrize(
    ("named", "action"), [("0x1 (PF FLR)", "reset_gpu"), ("0x2 (OS Reboot)", "reboot")]
)
def test_xid_154_knows_the_newer_drivers_names(named: str, action: str) -> None:
    """Newer drivers print the same actions under other names; an unknown name would mean a
    GPU reset where the driver asks for a reboot."""
    event = classify_kernel_line(
        f"NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to {named}"
    )
    assert event is not None and (event.severity, event.action) == ("fatal", action)


@pytest.mark.parametrize(
    ("line", "severity", "action", "words"),
    [
        (
            "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 "
            "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
            "error",  # NVIDIA's decode: link fatal, the GPU goes on; investigate software
            "none",
            ["NETIR_LINK_EVT fatal on link 0", "sub-code 38", "INVESTIGATE_SW/USER"],
        ),
        (
            "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 "
            "0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
            "warning",
            "none",
            ["SAW_MVB non-fatal on link 0", "error status 0x00000008", "CONTACT_SUPPORT"],
        ),
        (
            "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 "
            "0x00000000 0x00000000 0x00000000 0x00000000)",
            "fatal",
            "reset_gpu",
            ["link -1"],
        ),
    ],
)
def test_nvlink_xids_decode_their_sub_fields(
    line: str, severity: str, action: str, words: list[str]
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and event.kind == "xid"
    assert (event.severity, event.action) == (severity, action)
    for word in words:
        assert word in (event.meaning or "")


def test_sxid_lines() -> None:
    fatal = classify_kernel_line(
        "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 "
        "sourcetrack timeout error (First)"
    )
    assert fatal is not None
    assert (fatal.kind, fatal.code, fatal.device) == ("sxid", "24007", "0000:c3:00")
    assert (fatal.severity, fatal.action) == ("fatal", "reboot")
    assert fatal.meaning == "NVSwitch 0 error 24007 on link 28 (fatal)"
    benign = classify_kernel_line(
        "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate"
    )
    assert benign is not None and (benign.severity, benign.action) == ("warning", "none")


def test_an_sxid_dumps_severity_is_the_drivers_verdict() -> None:
    # _nvswitch_dump_error_entry prints "Severity %d" of NVSWITCH_ERROR_SEVERITY_TYPE:
    # NONFATAL = 0, FATAL = 1 (open-gpu-kernel-modules, ctrl_dev_nvswitch.h). Real lines:
    # nvtrust#124's non-fatal link error, NVSentinel's test data.
    nonfatal = classify_kernel_line(
        "[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine "
        "instance 44 Sub-engine instance 00"
    )
    assert nonfatal is not None and (nonfatal.kind, nonfatal.code) == ("sxid", "22013")
    assert (nonfatal.severity, nonfatal.action) == ("warning", "none")
    assert nonfatal.meaning == "NVSwitch 3 error 22013 (non-fatal)"
    fatal = classify_kernel_line(
        "[38889.018130] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine "
        "instance 00 Sub-engine instance 00"
    )
    assert fatal is not None and (fatal.severity, fatal.action) == ("fatal", "reboot")
    assert fatal.meaning == "NVSwitch 0 error 12033 (fatal)"
    # The register dump says no verdict: the kind's default.
    data = classify_kernel_line(
        "[   38.183583] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002c, "
        "0x0000002c, 0x00000000, 0x0000002c, 0x80005302, 0x00000000, 0x00000000, 0x00000000, "
        "0x00000000}"
    )
    assert data is not None and (data.severity, data.meaning) == ("error", "NVSwitch 3 error 22013")


def test_bus_off_forms() -> None:
    event = classify_kernel_line("NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.")
    assert event is not None and (event.kind, event.pci) == ("bus_off", "0000:2b:00.0")
    assert (event.device, event.severity, event.action) == ("0000:2b:00", "fatal", "reboot")
    old = classify_kernel_line("NVRM: GPU at 0000:01:00.0 has fallen off the bus.")
    assert old is not None and old.device == "0000:01:00"
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
    assert event.action == "reset_gpu"


@pytest.mark.parametrize(
    ("line", "family", "device"),
    [
        (
            "NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 "
            "heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200",
            "heartbeat",
            "GPU6",
        ),
        ("NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out", "heartbeat", None),
        (
            "NVRM: GPU0 _issueRpcAndWait: rpcRecvPoll timedout for fn 76 sequence 1234!",
            "rpc_timeout",
            "GPU0",
        ),
        (
            "NVRM: GPU6 _kgspBootGspRm: unexpected WPR2 already up, cannot proceed with "
            "booting GSP",
            "boot",
            "GPU6",
        ),
        ("NVRM RmInitAdapter: Cannot initialize GSP firmware RM", "init", None),
        (
            "NVRM: GPU 0000:a1:00.0: RmInitAdapter failed! (0x62:0x40:2168)",
            "init",
            "0000:a1:00",
        ),
        (
            "NVRM: GSP task exception: load access fault (cause:0x5) @ pc:0x100a2c8",
            "crashcat",
            None,
        ),
        (
            "NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.",
            "pmu_halt",
            "GPU0",
        ),
        (
            "NVRM: GPU0 krcRcAndNotifyAllChannels_IMPL: RC all channels for critical error 79.",
            "rc_critical",
            "GPU0",
        ),
        (
            "NVRM: GPU6 _kgspCheckIfMemsysError: Unexpected error when checking for memory "
            "subsystem error: 0x72",
            "error",
            "GPU6",
        ),
    ],
)
def test_gsp_failure_families(line: str, family: str, device: str | None) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code, event.device) == ("gsp", family, device)


def test_fsp_boot_command_timeouts_are_a_failed_gsp_boot_and_its_dump_is_not() -> None:
    """Hopper and later boot GSP-RM through the FSP: its command timing out is the boot failing
    (real lines: NVIDIA/nvtrust#58, #77, open-gpu-kernel-modules#729); the command dump after it
    and FSP debug-state lines are the report, not events."""
    for line in (
        "[  445.525805] NVRM: kfspPollForResponse_IMPL: FSP command timed out",
        "[  279.949523] NVRM: kfspPollForQueueEmpty_IMPL: Timed out waiting for FSP command queue "
        "to be empty.",
    ):
        event = classify_kernel_line(line)
        assert event is not None and (event.kind, event.code) == ("gsp", "boot")
    for line in (
        "[  445.525810] NVRM: kfspSendBootCommands_GH100: Sent following content to FSP:",
        "[  445.525812] NVRM: kfspSendBootCommands_GH100: version=0x1, size=0x35c, "
        "gspFmcSysmemOffset=0x125380000",
        "[  279.949534] NVRM: kfspDumpDebugState_GH100: NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2(0) "
        "= 0x9f",
    ):
        assert classify_kernel_line(line) is None


def test_the_fsp_queue_timeout_in_590_drivers_words_is_the_same_failed_boot() -> None:
    """open-gpu-kernel-modules 590.44.01 renamed kfspPollForQueueEmpty's "Timed out waiting for
    FSP command queue to be empty." to kfspPollForCanSend's "Timed out waiting for FSP queues
    to be empty." (src/nvidia/src/kernel/gpu/fsp/kern_fsp.c). Constructed from that source."""
    line = (
        "[  279.949523] NVRM: kfspPollForCanSend_IMPL: Timed out waiting for FSP queues to be "
        "empty."
    )
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("gsp", "boot")


def test_an_assertion_whose_message_is_a_gsp_rpc_timeout_is_that_timeout() -> None:
    """580's RM asserts with a message, not a condition, when GSP RPCs time out twice in a row
    (issues 446/942): the GPU is marked for reset, which is the GSP family's advice, not an
    assertion's. A condition that merely names an RPC stays an assertion."""
    line = (
        "192.168.11.119: kern: warning: [2026-04-22T21:30:51.526447914Z]: NVRM: "
        "nvAssertFailedNoLog: Assertion failed: Back to back GSP RPC timeout detected! "
        "GPU marked for reset @ kernel_gsp.c:2387"
    )
    event = classify_kernel_line(line)
    assert event is not None
    assert (event.kind, event.code, event.action) == ("gsp", "rpc_timeout", "reset_gpu")
    assert event.detail is not None and event.detail.endswith("@ kernel_gsp.c:2387")
    plain = (
        "[38679.940939] NVRM: nvAssertFailedNoLog: Assertion failed: pRpc != NULL @ objvgpu.c:150"
    )
    event = classify_kernel_line(plain)
    assert event is not None and (event.kind, event.code) == ("nv_err", "assertion")


def test_a_crashcat_fault_line_without_the_nvrm_tag() -> None:
    """The CrashCat report prints its fault line bare; the frames around it keep NVRM."""
    for line in (
        "GSP task watchdog timeout @ pc:0x1b66396, partition:4#0, task:3, gfid: 0",
        "Jun 12 16:25:44 fedora-box kernel: GSP task watchdog timeout @ pc:0x1b3e756, "
        "partition:4#0, task:3",
    ):
        event = classify_kernel_line(line)
        assert event is not None and (event.kind, event.code) == ("gsp", "crashcat")
    assert (
        classify_kernel_line("NVRM:     Reported by libos partition:4#5 kernel v3.1 [0] @ ts:1")
        is None
    )
    assert classify_kernel_line("fw: boot ok @ pc:0x1000") is None


def test_uvm_error_but_not_uvm_banner() -> None:
    event = classify_kernel_line("nvidia-uvm: Encountered a global fatal error: Unknown error")
    assert event is not None and event.kind == "uvm"
    assert (event.severity, event.action) == ("error", "restart_app")
    assert classify_kernel_line("nvidia-uvm: Unloaded the UVM driver.") is None
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
        "NVRM kgspExecuteBooterUnloadIfNeeded_TU102: skipping executing Booter Unload as WPR is "
        "not up",
        "NVRM: GPU4 GSP RPC buffer contains function 103 (GSP_RM_ALLOC) and data "
        "0x0000000000002081 0x0000000000000004.",
        " os_dump_stack+0xe/0x14 [nvidia]",
        "RIP: 0010:nvidia_vma_access+0x1b/0x350 [nvidia]",
        "---[ end Kernel panic - not syncing: Test panic triggered by crash_test module ]---",
        "Kernel panic - not syncing: Fatal exception",
        "systemd[1]: Starting Install of the nvidia-uvm module...",
        # udev failing to load the module (ollama/ollama#11932): user space, not UVM's own error
        "2025-08-16T00:03:06.481798-04:00 localhost (udev-worker)[106246]: nvidia: Process "
        "'/sbin/modprobe nvidia-uvm' failed with exit code 1.",
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


def test_old_kernels_oom_wording() -> None:
    event = classify_kernel_line(
        "Out of memory: Kill process 456 (python) score 50 or sacrifice child"
    )
    assert event is not None and (event.kind, event.pid, event.process) == (
        "oom_kill",
        456,
        "python",
    )
    rhel = classify_kernel_line("Out of memory: Killed process 123, UID 48, (httpd).")
    assert rhel is not None and (rhel.pid, rhel.process) == (123, "httpd")


@pytest.mark.parametrize(
    "line",
    [
        # microsoft/WSL#41659 (a WSL2 guest), ublue-os/bazzite#5546 (a kdump's log)
        "[   84.977175] Kernel panic - not syncing: Fatal machine check",
        "Kernel panic - not syncing: Fatal machine check",
    ],
)
def test_a_fatal_machine_checks_panic_is_a_hardware_error(line: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("oops", "hardware")
    assert (event.severity, event.action) == ("fatal", "inspect_hardware")
    assert "Fatal machine check" in (event.meaning or "")
    # the machine check's own report before the panic is no event (bazzite#5546)
    assert (
        classify_kernel_line("mce: [Hardware Error]: CPU 7: Machine Check Exception: 5 Bank 0")
        is None
    )


def test_nothing_to_kill_is_fatal_only_in_the_panic_after_it() -> None:
    # systemd/systemd#40208: a memory cgroup's OOM with nothing to kill, printed over and over
    # while the host runs on: no fatal event (a container's problem, not the host's)
    memcg = classify_kernel_line("kernel: Out of memory and no killable processes...")
    assert memcg is not None and (memcg.kind, memcg.code) == ("oom_kill", "nothing_to_kill")
    assert (memcg.severity, memcg.action) == ("error", "restart_app")
    # tempesta-tech/tempesta#1789 (5.10): the whole system's, then the panic it ends in
    panic = classify_kernel_line(
        "[ 3893.943877] Kernel panic - not syncing: System is deadlocked on memory"
    )
    assert panic is not None and (panic.kind, panic.code, panic.severity) == (
        "oops",
        "panic",
        "fatal",
    )
    # OpenXiangShan/XiangShan-doc#9 (4.18): before 4.19 the panic said it itself
    old = classify_kernel_line(
        "[   10.840000] Kernel panic - not syncing: Out of memory and no killable processes..."
    )
    assert old is not None and (old.kind, old.code, old.severity) == ("oops", "panic", "fatal")


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("Oops: 0000 [#1] PREEMPT SMP NOPTI", "oops"),
        ("Oops: Oops: 0000 [#1] SMP NOPTI", "oops"),
        ("Internal error: Oops: 0000000096000007 [#2] PREEMPT SMP", "oops"),
        ("Internal error: Oops - BUG: 00000000f2000800 [#1] PREEMPT SMP", "bug"),
        ("invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", "bug"),
        (
            "general protection fault, probably for non-canonical address 0x25b5f6bb1a24827e: "
            "0000 [#1] SMP NOPTI",
            "gpf",
        ),
        ("Kernel panic - not syncing: Hard LOCKUP", "panic"),
    ],
)
def test_oops_bug_gpf_and_panic_are_one_kind(line: str, code: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("oops", code)
    assert (event.severity, event.action) == ("fatal", "reboot")


def test_the_line_is_found_after_any_prefix() -> None:
    message = "NVRM: Xid (PCI:000f:01:00): 79, pid=2231, name=pt_main_thread, GPU has fallen off"
    for prefix in (
        "",
        "[  123.456789] ",
        "[  +0.000049] ",
        "[Sun Feb 23 16:24:18 2025] ",
        "kern  :err   : 2025-01-21T04:41:44,283302+00:00 ",
        "<3>[  123.456789] ",
        "3,1234,123456789,-;",
        "3,1234,123456789,-,caller=T123;",
        "[   10.123456][  T123] ",
        "Mar 29 15:38:59 kernel: ",
        "Mar 29 15:38:59 spark-01 kernel: ",
        "2026-09-14T14:02:21+0000 spark-01 kernel: ",
        "[  12.345678] spark-01 kernel: ",
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: ",
        "2026-04-22T21:27:51.291660856Z stdout F ",
        "déc. 08 12:07:18 bestosprec kernel: ",
    ):
        event = classify_kernel_line(prefix + message)
        assert event is not None and (event.kind, event.xid, event.pid) == ("xid", 79, 2231), prefix
    oom = classify_kernel_line(
        "Mar 29 15:38:59 spark-01 kernel: python3 invoked oom-killer: gfp_mask=0x140cca, order=0"
    )
    assert oom is not None and oom.process == "python3"


def test_the_oom_invokers_name_may_hold_a_space() -> None:
    # A task's name is up to 15 characters, spaces allowed: a JVM's "GC Thread#9" (pyNetLogo#53,
    # tests/fixtures/real), "VM Thread". Its quoted or unpeeled-prefix forms keep the last word.
    oom = classify_kernel_line(
        "Apr 25 19:05:01 netlogo01 kernel: [ 7097.004932] GC Thread#9 invoked oom-killer: "
        "gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0"
    )
    assert oom is not None and (oom.code, oom.process) == ("invoked", "GC Thread#9")
    quoted = classify_kernel_line(
        "> Sep 20 16:12:36 tz-pw2-83 kernel: [2073304.360305] pgcenter invoked oom-killer: "
        "gfp_mask=0x280da, order=0, oom_score_adj=0"
    )
    assert quoted is not None and quoted.process == "pgcenter"
    worker = classify_kernel_line("kworker/u16:3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL)")
    assert worker is not None and worker.process == "kworker/u16:3"  # constructed


def test_a_quote_mark_before_the_oom_invoker_is_no_part_of_its_name() -> None:
    # A mail quoting the bare message (linux-mm, Andrew Morton's reply of 7 Nov 2007,
    # https://lore.kernel.org/all/20071107102016.e9d24b0c.akpm@linux-foundation.org/): the
    # quote's '> ' is short enough to pass for the start of a 15-character name.
    quoted = classify_kernel_line(
        "> python invoked oom-killer: gfp_mask=0x1201d2, order=0, oomkilladj=0"
    )
    assert quoted is not None and quoted.process == "python"
    # a page's rendering artefact, as the corpus keeps them (constructed from the line above)
    listed = classify_kernel_line("- python invoked oom-killer: gfp_mask=0x1201d2, order=0")
    assert listed is not None and listed.process == "python"
    # a name that starts with punctuation keeps it (constructed: systemd's "(sd-pam)")
    sd_pam = classify_kernel_line("(sd-pam) invoked oom-killer: gfp_mask=0x1201d2, order=0")
    assert sd_pam is not None and sd_pam.process == "(sd-pam)"


def test_gpu_fault_kinds() -> None:
    assert {"xid", "sxid", "nv_err", "gsp", "uvm", "bus_off"} == GPU_FAULT_KINDS


def test_memory_cgroup_kill_in_the_3x_wording() -> None:
    # 3.x-4.x memcg OOM: lower-case "out of memory", "Kill process" (tests/fixtures/real, ltp#1080)
    event = classify_kernel_line(
        "Memory cgroup out of memory: Kill process 42453 (memcg_test_1) score 0 or sacrifice child"
    )
    assert event is not None and (event.kind, event.code, event.pid, event.process) == (
        "oom_kill",
        "cgroup",
        42453,
        "memcg_test_1",
    )


@pytest.mark.parametrize(
    ("line", "code", "process"),
    [
        ("swapper: page allocation failure. order:3, mode:0x4020", "page", "swapper"),
        ("vmalloc: allocation failure: 0 bytes", "vmalloc", None),
        (
            "modprobe: vmalloc: allocation failure: 8192 bytes, mode:0xcc0(GFP_KERNEL)",
            "vmalloc",
            "modprobe",
        ),
        ("vmalloc: allocation failure, allocated 4096 of 8192 bytes", "vmalloc", None),
        ("cma: cma_alloc: alloc failed, req-size: 2040 pages, ret: -12", "cma", None),
        ("cma_alloc: linux,cma: alloc failed, req-size: 512 pages, ret: -12", "cma", None),
        ("__cma_alloc: reserved: alloc failed, req-size: 4 pages, ret: -16", "cma", None),
    ],
)
def test_allocation_failures_in_older_wordings(line: str, code: str, process: str | None) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code, event.process) == (
        "alloc_failure",
        code,
        process,
    )


@pytest.mark.parametrize(
    ("line", "cpu"),
    [
        ("Watchdog CPU:59 Hard LOCKUP", "59"),
        ("watchdog: CPU 12 self-detected hard LOCKUP @ mmio_stuck+0x1c/0x40", "12"),
        ("watchdog: CPU4: Watchdog detected hard LOCKUP on cpu 5", "5"),
    ],
)
def test_hard_lockups_of_every_watchdog(line: str, cpu: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("soft_lockup", "hard")
    assert event.meaning == f"hard lockup on CPU {cpu}"


@pytest.mark.parametrize(
    ("line", "cpu", "process", "pid"),
    [
        # abrt/satyr tests/kerneloopses/gitlog-01 (3.5) and gitlog-02 (3.4)
        (
            "[   65.470000] BUG: spinlock lockup suspected on CPU#0, ksdioirqd/mmc0/73",
            "0",
            "ksdioirqd/mmc0",
            73,
        ),
        ("[   79.660000] BUG: spinlock lockup on CPU#0, swapper/0", "0", "swapper", 0),
    ],
)
def test_a_debug_kernels_spinlock_lockup_is_a_lockup(
    line: str, cpu: str, process: str, pid: int
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("soft_lockup", "spinlock")
    assert (event.process, event.pid) == (process, pid)
    assert event.meaning is not None and event.meaning.startswith(f"CPU#{cpu} stuck spinning")


@pytest.mark.parametrize(
    "line",
    [
        # constructed from spin_dump()'s other words in kernel/locking/spinlock_debug.c (4.10)
        "BUG: spinlock bad magic on CPU#1, swapper/1/0",
        "BUG: spinlock already unlocked on CPU#2, kworker/2:1/95",
        "BUG: spinlock wrong owner on CPU#0, insmod/812",
    ],
)
def test_a_debug_kernels_spinlock_misuse_is_no_lockup(line: str) -> None:
    assert classify_kernel_line(line) is None


@pytest.mark.parametrize(
    "line",
    [
        "hardlockup_watchdog_disable: cpu1: disabled",
        "pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010",
        "mce: [Hardware Error]: Machine check events logged",
        "EDAC MC1: 1 CE memory scrubbing error on CPU_SrcID#1_Ha#0_Chan#0_DIMM#0 (channel:0)",
        "nvme nvme1: I/O 775 QID 2 timeout, aborting",
    ],
)
def test_other_subsystems_hardware_errors_are_not_events(line: str) -> None:
    assert classify_kernel_line(line) is None


# An uncorrected PCIe AER report, as aer.c prints it (4.19+: "AER: " after the device).
AER_REPORT = [
    "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error message received from 0000:01:00.0",
    "nvidia 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
    "Layer, (Requester ID)",
    "nvidia 0000:01:00.0: AER:   device [10de:2330] error status/mask=00004000/00000000",
    "nvidia 0000:01:00.0: AER:    [14] CmpltTO                (First)",
    "pcieport 0000:00:01.0: AER: Root Port link has been reset (0)",
    "pcieport 0000:00:01.0: AER: device recovery failed",
]


def test_an_uncorrected_aer_report_is_one_event_on_its_bus_error_line() -> None:
    events = [classify_kernel_line(line) for line in AER_REPORT]
    assert [e is not None for e in events] == [False, True, False, False, False, False]
    event = events[1]
    assert event is not None
    assert (event.kind, event.code, event.device, event.pci) == (
        "aer",
        "fatal",
        "0000:01:00.0",
        "0000:01:00.0",
    )
    assert (event.severity, event.action) == ("fatal", "reboot")
    assert event.meaning is not None and "falling off the bus" in event.meaning
    assert "Transaction Layer" in event.meaning
    assert event.kind not in GPU_FAULT_KINDS  # any PCIe device: alerts only when fatal


@pytest.mark.parametrize(
    ("line", "device"),
    [
        # 2.6.3x-4.18: no "AER: " tag, the agent's id
        (
            "[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
            "type=Transaction Layer, id=0010(Receiver ID)",
            "0000:00:02.0",
        ),
        # a device gone from config space, a VMD domain, CXL (6.x), a bare paste
        (
            "pcieport 10000:e0:03.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), "
            "type=Inaccessible, (Unregistered Agent ID)",
            "10000:e0:03.0",
        ),
        (
            "cxl_pci 0000:0D:00.0: AER: CXL Bus Error: severity=Uncorrected (Fatal), "
            "type=Transaction Layer, (Receiver ID)",
            "0000:0d:00.0",
        ),
        (
            "PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
            None,
        ),
    ],
)
def test_aer_fatal_forms(line: str, device: str | None) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code, event.device) == ("aer", "fatal", device)


@pytest.mark.parametrize(
    ("severity", "code"),
    [("Uncorrectable (Fatal)", "fatal"), ("Uncorrectable (Non-Fatal)", "nonfatal")],
)
def test_aer_in_the_pcie_spec_terms_of_newer_kernels(severity: str, code: str) -> None:
    # aer.c says "Uncorrectable"/"Correctable" since "PCI/AER: Use 'Correctable' and
    # 'Uncorrectable' spec terms for errors" (6.x); a fatal one must not go unseen there.
    event = classify_kernel_line(
        f"pcieport 0000:00:01.0: AER: PCIe Bus Error: severity={severity}, "
        "type=Transaction Layer, (Requester ID)"
    )
    assert event is not None and (event.kind, event.code) == ("aer", code)


def test_aer_nonfatal_is_an_error_with_no_action() -> None:
    event = classify_kernel_line(
        "Mar 29 15:38:59 spark-01 kernel: nvidia 0000:0f:00.0: AER: PCIe Bus Error: "
        "severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"
    )
    assert event is not None
    assert (event.kind, event.code, event.device) == ("aer", "nonfatal", "0000:0f:00.0")
    assert (event.severity, event.action) == ("error", "none")


@pytest.mark.parametrize(
    "line",
    [
        "pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0",
        "pcieport 0000:00:1c.4: AER: Uncorrected (Non-Fatal) error received: id=00e4",
        "pcieport 0000:00:03.0: AER: Multiple Uncorrectable (Fatal) error message received from "
        "0000:03:00.0",
        "pcieport 0000:00:1c.5: AER: Multiple Corrected error received: id=00e5",
        "pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "id=00e5(Receiver ID)",
        "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, "
        "(Transmitter ID)",
    ],
)
def test_aer_lines_that_are_no_event(line: str) -> None:
    assert classify_kernel_line(line) is None


GHES_FATAL = "[ 3157.663610] {763}[Hardware Error]: event severity: fatal"


def test_fatal_ghes_record_is_a_hardware_oops_that_says_inspect_hardware() -> None:
    event = classify_kernel_line(GHES_FATAL)
    assert event is not None
    assert (event.kind, event.code, event.severity, event.action) == (
        "oops",
        "hardware",
        "fatal",
        "inspect_hardware",
    )
    assert "APEI GHES" in (event.meaning or "")


@pytest.mark.parametrize(
    "line",
    [
        "[  387.748837] {1}[Hardware Error]: event severity: recoverable",
        "kernel: [25131.754408] {77}[Hardware Error]: event severity: corrected",
        "{1}[Hardware Error]:  Error 0, type: fatal",
        "{1}[Hardware Error]:   section_type: PCIe error",
        "{1}[Hardware Error]:   aer_uncor_status: 0x00100000, aer_uncor_mask: 0x00018000",
        "[    2.345575] [Hardware Error]: event severity: fatal",  # BERT: the last boot's
        "mce: [Hardware Error]: Machine check events logged",
        # extlog's numbering without HW_ERR (drivers/acpi/acpi_extlog.c: "%s{%u}")
        "{1}Hardware error detected on CPU2",
        "{1}event severity: fatal",
    ],
)
def test_ghes_corrected_recoverable_continuation_and_bert_lines_are_quiet(line: str) -> None:
    assert classify_kernel_line(line) is None


@pytest.mark.parametrize(
    "line",
    [
        "Kernel panic - not syncing: Fatal hardware error!",
        "[   71.100633] Kernel panic - not syncing: GHES: Fatal hardware error",
    ],
)
def test_the_panic_after_a_fatal_ghes_record_restates_it(line: str) -> None:
    assert classify_kernel_line(line) is None


def test_a_call_failed_with_status_0xf_is_the_gpu_lost() -> None:
    # Cyridd/cmpunlocker#4 (610.57.04): the GPU fell off the bus after a PCIe retrain
    event = classify_kernel_line(
        "[   10.889083] NVRM: GPU0 kgmmuInvalidateTlb_GM107: TLB invalidation failed waiting for "
        "prior invalidate (status=0x0000000f), vaspaceFlags 0x84000000, scope 0x2, GFID 0"
    )
    assert event is not None
    assert (event.kind, event.code, event.device) == ("nv_err", "NV_ERR_GPU_IS_LOST", "GPU0")
    other = classify_kernel_line(
        "NVRM: GPU0 kgmmuInvalidateTlb_GM107: TLB invalidation failed waiting for prior "
        "invalidate (status=0x00000040), vaspaceFlags 0x84000000, scope 0x2, GFID 0"
    )
    assert other is None
    gsp = classify_kernel_line(
        "NVRM: GPU0 rpcRmApiFree_GSP: GspRmFree failed: hClient=0xc1d00029; hObject=0xcef00000; "
        "paramsStatus=0x00000000; status=0x0000000f"
    )
    assert gsp is not None and gsp.kind == "gsp"


@pytest.mark.parametrize(
    ("line", "code", "severity", "action"),
    [
        # nccl#2241: the reporter replaced the address (and the registers) with "..."
        (
            "NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)",
            145,
            "warning",
            "none",
        ),
        (
            "NVRM: Xid (PCI:...): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error",
            137,
            "warning",
            "none",
        ),
    ],
)
def test_an_xid_whose_address_a_report_redacted_is_still_that_xid(
    line: str, code: int, severity: str, action: str
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.xid, event.device) == ("xid", code, None)
    assert (event.severity, event.action) == (severity, action)


def test_an_nvlink_xid_without_its_registers_keeps_the_drivers_verdict() -> None:
    # no registers to decode: the line's own "Nonfatal" stands, and no sub-code is made up
    event = classify_kernel_line(
        "NVRM: Xid (PCI:0000:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)"
    )
    assert event is not None and (event.severity, event.action) == ("warning", "none")
    assert "non-fatal on link 11" in (event.meaning or "")
    assert "sub-code" not in (event.meaning or "")
    fatal = classify_kernel_line("NVRM: Xid (PCI:0000:01:00): 149, NETIR Fatal XC0 i0 Link -1")
    assert fatal is not None and (fatal.severity, fatal.action) == ("fatal", "reset_gpu")


def test_a_long_line_of_failed_driver_calls_classifies_in_linear_time() -> None:
    # "failed" then "(status=0x...f)" after it: a line of many "failed" is scanned once, not
    # again from each of them (constructed, against a line as long without the word)
    def cost(body: str) -> float:
        return fastest(lambda: classify_kernel_line("NVRM: status= " + body))

    length = 65_536
    assert cost(("failed " * length)[:length]) < 50 * cost(("fxiled " * length)[:length])


def test_a_long_redacted_xid_address_classifies_in_linear_time() -> None:
    # "Xid (PCI:..." then a long run with no ")": each "Xid (" is tried once
    def cost(body: str) -> float:
        return fastest(lambda: classify_kernel_line("NVRM: Xid (PCI:..." + body))

    length = 10_000
    assert cost(("Xid (PCI:..." * length)[:length]) < 50 * cost(("b " * length)[:length])


@pytest.mark.parametrize(
    "line",
    [
        # openwall/john#5835: the status a debug-dump callback met after the GPU disappeared
        "[   35.564060] NVRM: nvCheckOkFailedNoLog: Check failed: GPU lost from the bus "
        "[NV_ERR_GPU_IS_LOST] (0x0000000F) returned from nvdEngineDumpCallbackHelper(pGpu, "
        "pPrbEnc, pNvDumpState, pEngineCallback) @ nv_debug_dump.c:274",
        "NVRM: GPU0 kgmmuInvalidateTlb_GM107: TLB invalidation failed waiting for prior "
        "invalidate (status=0x0000000f), vaspaceFlags 0x84000000, scope 0x2, GFID 0",
    ],
)
def test_the_gpu_lost_from_the_bus_is_fatal_and_asks_for_a_reboot(line: str) -> None:
    # as Xid 79 does: NVIDIA's resolution for a GPU off the bus is to restart the machine
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("nv_err", "NV_ERR_GPU_IS_LOST")
    assert (event.severity, event.action) == ("fatal", "reboot")


@pytest.mark.parametrize(
    "line",
    [
        # CachyOS/linux-cachyos#974 (7.1): mce_timed_out()'s panic, indented as the report
        # quotes it; its other timeouts name the machine check in their own words
        "    Kernel panic - not syncing: Timeout: Not all CPUs entered broadcast exception handler",
        # linuxppc/issues#137: powerpc's die line for an unrecoverable machine check
        "[    0.000000] Oops: Machine check, sig: 7 [#1]",
    ],
)
def test_a_machine_check_the_kernel_dies_of_in_other_words_is_a_hardware_error(
    line: str,
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("oops", "hardware")
    assert (event.severity, event.action) == ("fatal", "inspect_hardware")


def test_a_failed_booter_ucode_is_a_failed_gsp_boot_and_a_skipped_unload_is_not() -> None:
    """Turing and later run the Booter ucode to load GSP-RM: it failing is the GSP boot failing
    (real lines: open-gpu-kernel-modules#673 on 520, without NVRM's colon, and
    ublue-os/bazzite#4494 on 595, with a GPU tag). Skipping the Booter Unload is routine
    (#120)."""
    for line in (
        "NVRM s_executeBooterUcode_TU102: Booter failed with non-zero error code: 0xa",
        "NVRM: GPU0 s_executeBooterUcode_TU102: Booter failed with non-zero error code: 0xb",
    ):
        event = classify_kernel_line(line)
        assert event is not None and (event.kind, event.code) == ("gsp", "boot")
    skipped = (
        "Feb 02 01:08:04 Host-24 kernel: NVRM kgspExecuteBooterUnloadIfNeeded_TU102: skipping "
        "executing Booter Unload as WPR is not up"
    )
    assert classify_kernel_line(skipped) is None


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA/open-gpu-kernel-modules#433 (525, RTX 3060 Ti): the GSP's RISC-V core not
        # started, and FWSEC (which carves out the WPR2 region GSP-RM boots in) failing
        "[  217.545142] NVRM kgspInitRm_IMPL: cannot bootstrap riscv/gsp: 0xffff",
        "[  217.738211] NVRM s_executeFwsec_TU102: failed to execute FWSEC for FRTS: FRTS error "
        "code 0xbe",
    ],
)
def test_a_gsp_core_that_cannot_be_bootstrapped_or_a_failed_fwsec_is_a_failed_boot(
    line: str,
) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("gsp", "boot")


def test_rm_init_nv_device_failing_is_a_failed_gpu_init() -> None:
    """RmInitNvDevice failing is RmInitAdapter bailing out before GSP-RM is up (real line:
    NVIDIA/nvtrust#72, an H100 in a TDX guest); the "RmInitAdapter failed!" that follows is
    the same init failure."""
    line = "[  799.305279] NVRM: RmInitNvDevice: *** Cannot initialize the device"
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("gsp", "init")
