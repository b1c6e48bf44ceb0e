"""GpuSource and NvmlXidSource against a fake pynvml module (GB10-like: memory unsupported)."""

from __future__ import annotations

import threading
import types
from pathlib import Path
from typing import Any

import pytest

from agent.sources.gpu import GpuSource, gpu_present

NOT_SUPPORTED, TIMEOUT, GPU_IS_LOST = 3, 10, 15
XID_CRITICAL = 8


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {NOT_SUPPORTED: "Not Supported", TIMEOUT: "Timeout"}.get(self.value, "GPU is lost")


def fake_nvml(
    *, memory_supported: bool = False, events: list[tuple[int, int]] | None = None
) -> Any:
    """A pynvml stand-in: one GB10-like device (index 0) plus a second normal one."""
    pending = list(events or [])
    calls: dict[str, int] = {"init": 0, "free": 0}

    def mem_info(handle: int) -> Any:
        if handle == 0 and not memory_supported:
            raise FakeNVMLError(NOT_SUPPORTED)
        return types.SimpleNamespace(used=2 * 2**30, total=80 * 2**30, free=78 * 2**30)

    def wait(event_set: Any, timeout_ms: int) -> Any:
        if pending:
            device, code = pending.pop(0)
            return types.SimpleNamespace(device=device, eventType=XID_CRITICAL, eventData=code)
        raise FakeNVMLError(TIMEOUT)

    def init() -> None:
        calls["init"] += 1

    def free(event_set: Any) -> None:
        calls["free"] += 1

    return types.SimpleNamespace(
        calls=calls,
        NVMLError=FakeNVMLError,
        NVML_ERROR_NOT_SUPPORTED=NOT_SUPPORTED,
        NVML_ERROR_TIMEOUT=TIMEOUT,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_GRAPHICS=0,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        nvmlEventTypeXidCriticalError=XID_CRITICAL,
        nvmlInit=init,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetIndex=lambda h: h,
        nvmlDeviceGetName=lambda h: b"NVIDIA GB10" if h == 0 else "NVIDIA H100",
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(
            busId=b"0000000F:01:00.0" if h == 0 else b"00000000:2B:00.0"
        ),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=95 - h, memory=0),
        nvmlDeviceGetMemoryInfo=mem_info,
        nvmlDeviceGetTemperature=lambda h, sensor: 41 + h,
        nvmlDeviceGetPowerUsage=lambda h: 11170 + h,
        nvmlDeviceGetClockInfo=lambda h, kind: {0: 2418, 1: 2418, 2: 4266}[kind],
        nvmlEventSetCreate=lambda: object(),
        nvmlDeviceRegisterEvents=lambda h, types_, es: None,
        nvmlEventSetWait_v2=wait,
        nvmlEventSetFree=free,
    )


def test_unsupported_memory_is_null_and_named() -> None:
    source, info = GpuSource.create(nvml=fake_nvml())
    assert info is None and source is not None
    section = source.read()
    assert section["name"] == "NVIDIA GB10"
    assert section["pci"] == "0000000F:01:00.0"
    assert section["util"] == 95
    assert section["mem_used"] is None and section["mem_total"] is None
    assert section["unsupported"] == ["mem_used", "mem_total"]
    assert section["temp_c"] == 41
    assert section["power_w"] == pytest.approx(11.17)
    assert section["clocks"] == {"sm": 2418, "mem": 4266, "graphics": 2418}
    second = section["devices"][1]
    assert second["mem_used"] == 2 * 2**30 and second["mem_total"] == 80 * 2**30
    assert second["unsupported"] == []


def test_other_nvml_errors_fail_the_sample() -> None:
    nvml = fake_nvml(memory_supported=True)

    def lost(handle: int) -> Any:
        raise FakeNVMLError(GPU_IS_LOST)

    nvml.nvmlDeviceGetTemperature = lambda h, s: lost(h)
    source, _ = GpuSource.create(nvml=nvml)
    assert source is not None
    with pytest.raises(FakeNVMLError):
        source.read()


def test_no_library_turns_the_source_off_with_a_message() -> None:
    def init() -> None:
        raise FakeNVMLError(12)  # NVML Shared Library Not Found

    nvml = fake_nvml()
    nvml.nvmlInit = init
    source, info = GpuSource.create(nvml=nvml)
    assert source is None
    assert info is not None and info.startswith("GPU source off: NVML unavailable")


def test_pynvml_import_failure_is_an_info(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    source, info = GpuSource.create(present=lambda: True)
    assert source is None
    assert info == "GPU source off: nvidia-ml-py (pynvml) is not installed"


def test_without_a_gpu_pynvml_is_not_even_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    source, info = GpuSource.create(present=lambda: False)
    assert source is None
    assert info is not None and info.startswith("GPU source off: no NVIDIA GPU")
    assert "pynvml" not in sys.modules


def test_gpu_presence_is_read_from_the_driver_files(tmp_path: Path) -> None:
    dev, proc = tmp_path / "dev", tmp_path / "proc"
    dev.mkdir()
    (dev / "null").touch()
    assert not gpu_present(str(dev), str(proc))
    (dev / "nvidiactl").touch()
    assert gpu_present(str(dev), str(proc))
    (dev / "nvidiactl").unlink()
    (proc / "driver" / "nvidia").mkdir(parents=True)
    assert gpu_present(str(dev), str(proc))
    assert not gpu_present(str(tmp_path / "missing"), str(tmp_path / "missing"))


def test_xid_events_become_journal_lines() -> None:
    nvml = fake_nvml(events=[(0, 13), (1, 79)])
    source, _ = GpuSource.create(nvml=nvml)
    assert source is not None
    xid = source.xid_source(clock=lambda: 1764400001.5)
    lines: list[dict[str, Any]] = []
    stop = threading.Event()

    def emit(line: dict[str, Any]) -> None:
        lines.append(line)
        if len(lines) == 2:
            stop.set()

    xid.run(emit, stop)
    assert lines == [
        {
            "ts": 1764400001.5,
            "source": "journal",
            "priority": 3,
            "text": "NVML: Xid 13 on GPU 0 (0000000F:01:00.0)",
            "fields": {"xid": 13, "gpu": 0, "pci": "0000000F:01:00.0", "origin": "nvml"},
        },
        {
            "ts": 1764400001.5,
            "source": "journal",
            "priority": 3,
            "text": "NVML: Xid 79 on GPU 1 (00000000:2B:00.0)",
            "fields": {"xid": 79, "gpu": 1, "pci": "00000000:2B:00.0", "origin": "nvml"},
        },
    ]
    assert nvml.calls["free"] == 1


def test_xid_registration_unsupported_reports_once_and_returns() -> None:
    nvml = fake_nvml()

    def refuse(handle: Any, kinds: int, event_set: Any) -> None:
        raise FakeNVMLError(NOT_SUPPORTED)

    nvml.nvmlDeviceRegisterEvents = refuse
    source, _ = GpuSource.create(nvml=nvml)
    assert source is not None
    events: list[tuple[str, dict[str, Any]]] = []
    source.xid_source(on_event=lambda k, d: events.append((k, d))).run(
        lambda line: None, threading.Event()
    )
    assert events == [
        ("source_info", {"source": "nvml_xid", "info": "Xid events off: not supported"})
    ]
