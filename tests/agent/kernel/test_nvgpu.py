"""Jetson's integrated GPU (the ``nvgpu`` driver): the error notifier a channel's process
receives is the Xid of that number (NVGPU_CHANNEL_FIFO_ERROR_MMU_ERR_FLT is 31, as Xid 31), on
the GPU's platform device; the fault dump around it and other drivers' notifiers are no event."""

from __future__ import annotations

import pytest

from agent.kernel.classify import classify_kernel_line
from tests.support.timing import fastest


@pytest.mark.parametrize(
    ("line", "device", "process"),
    [
        # sergeev917/jetson-nano-jetpack4.6-repro (L4T 32.7, Jetson Nano): no owner named
        (
            "[418034.758141] nvgpu: 57000000.gpu   nvgpu_set_error_notifier_locked:137  [ERR]  "
            "error notifier set to 31 for ch 507",
            "57000000.gpu",
            None,
        ),
        # OE4T/tegra-demo-distro#342 (Jetson Orin): the channel's owner
        (
            "nvgpu: 17000000.gpu     nvgpu_set_err_notifier_locked:143  [ERR]  error notifier "
            "set to 31 for ch 479 owned by consumer_thread",
            "17000000.gpu",
            "consumer_thread",
        ),
    ],
)
def test_an_nvgpu_error_notifier_is_the_xid_of_its_number(
    line: str, device: str, process: str | None
) -> None:
    event = classify_kernel_line(line)
    assert event is not None
    assert (event.kind, event.code, event.xid, event.device) == ("xid", "31", 31, device)
    assert event.process == process
    assert (event.severity, event.action) == ("error", "restart_app")  # Xid 31's catalog entry
    assert "page fault" in (event.meaning or "")
    assert "ch " in (event.meaning or "")


def test_the_notifier_takes_the_meaning_of_each_code() -> None:
    # constructed from nvgpu's printk format with NVGPU_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT (8)
    event = classify_kernel_line(
        "nvgpu: 17000000.gpu     nvgpu_set_err_notifier_locked:143  [ERR]  error notifier "
        "set to 8 for ch 12 owned by python3"
    )
    assert event is not None and (event.kind, event.code, event.xid) == ("xid", "8", 8)
    assert "idle timeout" in (event.meaning or "")


def test_a_notifier_wrapped_off_its_tag_is_still_nvgpus_when_it_names_the_owner() -> None:
    # SLM-OS/SLM-Operating-System#291 (Jetson Orin): the reporter wrapped nvgpu's line after
    # "[ERR]", so the code and channel stand alone; only nvgpu names an owner (nouveau's
    # "error notifier set to %d for ch %d" never does), so the words alone say whose it is
    event = classify_kernel_line("  error notifier set to 13 for ch 508 owned by gpu-channel-hel")
    assert event is not None
    assert (event.kind, event.code, event.device) == ("xid", "13", None)
    assert event.process == "gpu-channel-hel"


@pytest.mark.parametrize(
    "line",
    [
        # the fault dump before the notifier (sergeev917, OE4T#342)
        "[418034.716376] nvgpu: 57000000.gpu gk20a_fifo_handle_mmu_fault_locked:1723 [ERR]   "
        "mmu fault on engine 0, engine subid 0 (gpc), client 4 (t1 1), addr 0x7fadf9d000, "
        "type 3 (va limit viol), access_type 0x00000001,inst_ptr 0x7fe431000",
        "nvgpu: 17000000.gpu       nvgpu_tsg_set_ctx_mmu_error:1069 [ERR]  TSG 8 generated a "
        "mmu fault",
        # a camera driver's notifier, as NVIDIA's NvMedia sample prints it: not the GPU's
        "    tegra-vi4 15700000.vi: error notifier set to 1",
        # constructed: the words without the driver's tag or an owner (nouveau's words too)
        "error notifier set to 31 for ch 4",
    ],
)
def test_other_lines_are_no_event(line: str) -> None:
    assert classify_kernel_line(line) is None


def test_a_long_line_of_notifier_words_classifies_in_linear_time() -> None:
    # constructed: many "nvgpu: " tags and notifier words, against a line as long without them
    def cost(body: str) -> float:
        return fastest(lambda: classify_kernel_line(body))

    length = 65_536
    unit = "nvgpu: x error notifier set to 1 for "
    assert cost((unit * length)[:length]) < 50 * cost(("nvgpu: x " * length)[:length])
