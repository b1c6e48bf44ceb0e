"""Burst triggers and the burst window on an injected clock."""

from __future__ import annotations

from agent.burst import BurstController, is_trigger_line

NV_ERR = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)


def line(source: str, text: str) -> dict[str, object]:
    return {"ts": 1.0, "source": source, "priority": 6, "text": text, "fields": None}


def test_trigger_lines() -> None:
    load = "(EngineCore pid=168) INFO 05-14 08:21:00 [gpu_model_runner.py:4790] Starting to load model nvidia/Qwen3.6-35B-A3B-NVFP4..."  # noqa: E501
    weights = "(EngineCore pid=168) INFO 05-14 08:23:05 [default_loader.py:384] Loading weights took 126.18 seconds"  # noqa: E501
    assert is_trigger_line(line("vllm", load)) == "vllm: Starting to load model"
    assert is_trigger_line(line("vllm", weights)) == "vllm: Loading weights"
    assert is_trigger_line(line("kmsg", NV_ERR)) == "gpu fault: NVRM:"
    xid = "NVRM: Xid (PCI:000f:01:00): 13, Graphics SM Warp Exception"
    assert is_trigger_line(line("kmsg", xid)) == "gpu fault: NVRM:"
    assert is_trigger_line(line("journal", "NVML: Xid 13 on GPU 0 (x)")) == "gpu fault: Xid"


def test_non_trigger_lines() -> None:
    serving = "(APIServer pid=1) INFO:     Application startup complete."
    assert is_trigger_line(line("vllm", serving)) is None
    assert is_trigger_line(line("kmsg", "usb 1-1: new high-speed USB device")) is None
    # vLLM merely mentioning the driver is not a GPU fault; its own phases are checked instead.
    assert is_trigger_line(line("vllm", "nvidia driver NVRM: banner echoed")) is None


def test_window_interval_and_marking() -> None:
    now = [100.0]
    burst = BurstController(duration_s=60.0, hz=10.0, clock=lambda: now[0])
    assert burst.interval(1.0) == 1.0 and burst.mark({})["burst"] is False
    assert burst.observe(line("kmsg", NV_ERR)) == "gpu fault: NVRM:"
    assert burst.interval(1.0) == 0.1 and burst.mark({})["burst"] is True
    now[0] = 150.0
    assert burst.trigger("vllm: Loading weights") is False  # extends, not a new burst
    now[0] = 209.9
    assert burst.active
    now[0] = 210.0
    assert not burst.active and burst.interval(1.0) == 1.0
    assert burst.trigger("again") is True
