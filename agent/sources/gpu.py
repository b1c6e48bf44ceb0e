"""GPU telemetry through NVML (nvidia-ml-py): a per-tick sample and a Xid event follower.

NVML is loaded in-process once (never a forked ``nvidia-smi``). A value the device does not
report (GB10's unified memory answers NOT_SUPPORTED for memory info) becomes null and is named
in ``unsupported`` instead of failing the sample.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# NVML return codes that mean "this device cannot tell", not "something broke".
_UNSUPPORTED_CODES = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
_CLOCKS = (("sm", "NVML_CLOCK_SM"), ("mem", "NVML_CLOCK_MEM"), ("graphics", "NVML_CLOCK_GRAPHICS"))
DRIVER_PATHS = ("/dev/nvidia*", "/proc/driver/nvidia")
XID_WAIT_MS = 500  # short, so the follower notices stop within half a second


def gpu_present(dev: str = "/dev", proc: str = "/proc") -> bool:
    """Whether the NVIDIA driver shows a device: ``/dev/nvidia*`` or ``/proc/driver/nvidia``."""
    if os.path.exists(os.path.join(proc, "driver/nvidia")):
        return True
    try:
        return any(name.startswith("nvidia") for name in os.listdir(dev))
    except OSError:
        return False


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class GpuSource:
    """SampleSource ``gpu``: the first device's readings, plus ``devices`` when there are more.

    Section: ``{"index", "pci", "name", "util" (%), "mem_used", "mem_total" (bytes),
    "temp_c", "power_w", "clocks": {"sm", "mem", "graphics"} (MHz), "unsupported": [...]}``.
    """

    name = "gpu"

    def __init__(self, nvml: Any) -> None:
        """Take an initialised NVML module (``pynvml`` or a test double)."""
        self._nvml = nvml
        self._unsupported_codes = {
            getattr(nvml, code) for code in _UNSUPPORTED_CODES if hasattr(nvml, code)
        }
        count = nvml.nvmlDeviceGetCount()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.pci = [self._static(h, "nvmlDeviceGetPciInfo") for h in self._handles]
        self.names = [self._static(h, "nvmlDeviceGetName") for h in self._handles]

    @classmethod
    def create(
        cls, nvml: Any = None, *, present: Callable[[], bool] | None = None
    ) -> tuple[GpuSource | None, str | None]:
        """Return ``(source, None)``, or ``(None, "GPU source off: ...")`` to report once.

        Without ``nvml``, pynvml is imported only where ``present()`` (default: the driver's
        device files) says an NVIDIA GPU is: it costs the agent ~3 MB of RSS."""
        if nvml is None:
            if not (present or gpu_present)():
                return None, f"GPU source off: no NVIDIA GPU ({', '.join(DRIVER_PATHS)} absent)"
            try:
                # optional: bundled into the zipapp when available
                nvml = importlib.import_module("pynvml")
            except ImportError:
                return None, "GPU source off: nvidia-ml-py (pynvml) is not installed"
        try:
            nvml.nvmlInit()
            source = cls(nvml)
        except Exception as exc:  # no driver, no libnvidia-ml.so, driver/library mismatch
            return None, f"GPU source off: NVML unavailable ({exc})"
        if not source._handles:
            return None, "GPU source off: NVML sees no device"
        return source, None

    def _static(self, handle: Any, fn: str) -> str | None:
        try:
            value = getattr(self._nvml, fn)(handle)
        except Exception:
            return None
        return _text(getattr(value, "busId", value))

    def _is_unsupported(self, exc: Exception) -> bool:
        return getattr(exc, "value", None) in self._unsupported_codes

    def _device(self, index: int, handle: Any) -> dict[str, Any]:
        nvml = self._nvml
        unsupported: list[str] = []

        def ask(key: str, fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except nvml.NVMLError as exc:
                if self._is_unsupported(exc):
                    unsupported.append(key)
                    return None
                raise

        util = ask("util", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        mem = ask("mem", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        if mem is None:
            unsupported[unsupported.index("mem")] = "mem_used"
            unsupported.append("mem_total")
        temp = ask(
            "temp_c", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        power_mw = ask("power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle))

        def clock(const: str) -> Callable[[], Any]:
            return lambda: nvml.nvmlDeviceGetClockInfo(handle, getattr(nvml, const))

        clocks = {key: ask(f"clocks.{key}", clock(const)) for key, const in _CLOCKS}
        return {
            "index": index,
            "pci": self.pci[index],
            "name": self.names[index],
            "util": None if util is None else util.gpu,
            "mem_used": None if mem is None else mem.used,
            "mem_total": None if mem is None else mem.total,
            "temp_c": temp,
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "clocks": clocks,
            "unsupported": unsupported,
        }

    def read(self) -> dict[str, Any]:
        devices = [self._device(i, h) for i, h in enumerate(self._handles)]
        section = dict(devices[0])
        if len(devices) > 1:
            section["devices"] = devices
        return section

    def xid_source(
        self,
        *,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> NvmlXidSource:
        """The Xid follower for the same devices (NVML calls are thread-safe)."""
        return NvmlXidSource(self._nvml, self._handles, self.pci, clock=clock, on_event=on_event)


class NvmlXidSource:
    """LineSource ``nvml_xid``: Xid critical errors from NVML's event API, as journal lines.

    Each Xid becomes ``{"source": "journal", "priority": 3,
    "text": "NVML: Xid <code> on GPU <idx> (<pci>)", "fields": {"xid", "gpu", "pci", "origin"}}``:
    a second witness next to the kernel's own ``NVRM: Xid`` line, which still arrives when
    kmsg is unreadable (containers, permissions).
    """

    name = "nvml_xid"

    def __init__(
        self,
        nvml: Any,
        handles: list[Any],
        pci: list[str | None],
        *,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        wait_ms: int = XID_WAIT_MS,
    ) -> None:
        self._nvml = nvml
        self._handles = handles
        self._pci = pci
        self._clock = clock
        self._on_event = on_event or (lambda kind, data: None)
        self._wait_ms = wait_ms

    def _register(self) -> Any | None:
        nvml = self._nvml
        event_set = nvml.nvmlEventSetCreate()
        registered = 0
        for handle in self._handles:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except nvml.NVMLError as exc:
                log.info("NVML Xid events not available on a device: %s", exc)
        if registered:
            return event_set
        nvml.nvmlEventSetFree(event_set)
        return None

    def _index_of(self, device: Any) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetIndex(device))
        except Exception:
            return None

    def _line(self, data: Any) -> dict[str, Any]:
        code = int(data.eventData)
        index = self._index_of(data.device)
        pci = self._pci[index] if index is not None and index < len(self._pci) else None
        return {
            "ts": self._clock(),
            "source": "journal",
            "priority": 3,
            "text": f"NVML: Xid {code} on GPU {index} ({pci})",
            "fields": {"xid": code, "gpu": index, "pci": pci, "origin": "nvml"},
        }

    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        nvml = self._nvml
        try:
            event_set = self._register()
        except Exception as exc:
            self._on_event("source_info", {"source": self.name, "info": f"Xid events off: {exc}"})
            return
        if event_set is None:
            self._on_event(
                "source_info", {"source": self.name, "info": "Xid events off: not supported"}
            )
            return
        timeout_code = getattr(nvml, "NVML_ERROR_TIMEOUT", None)
        failing = False  # report a failure once, then retry quietly until it clears
        try:
            while not stop.is_set():
                try:
                    data = nvml.nvmlEventSetWait_v2(event_set, self._wait_ms)
                except nvml.NVMLError as exc:
                    if getattr(exc, "value", None) == timeout_code:
                        failing = False
                        continue
                    if not failing:
                        self._on_event("source_error", {"source": self.name, "error": str(exc)})
                    failing = True
                    stop.wait(5.0)  # a lost GPU answers at once: don't spin
                    continue
                failing = False
                if int(data.eventType) & nvml.nvmlEventTypeXidCriticalError:
                    emit(self._line(data))
        finally:
            with contextlib.suppress(Exception):
                nvml.nvmlEventSetFree(event_set)
