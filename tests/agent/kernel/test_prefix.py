"""A kernel line's message is found behind whatever prefix the tool that printed it added."""

from __future__ import annotations

import pytest

from agent.kernel.prefix import kernel_message

MSG = "NVRM: GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out"


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "[   24.302465] ",  # dmesg
        "[  +0.000049] ",  # dmesg -H, relative
        "[Feb23 16:24] ",  # dmesg -H, first line of a minute
        "[Sun Feb 23 16:24:18 2025] ",  # dmesg -T
        "2025-01-21T04:41:44,283302+00:00 ",  # dmesg --time-format iso
        "kern  :err   : ",  # dmesg --decode
        "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ",
        "[   24.302465] [  T123] ",  # printk caller id
        "[   24.302465][    C3] ",
        "<3>",  # a priority
        "<3>[   24.302465] ",  # pstore
        "3,1234,24302465,-;",  # raw /dev/kmsg
        "3,1234,24302465,-,caller=T123;",
        "Mar 21 21:42:01 kernel: ",  # journalctl --no-hostname
        "Mar 21 21:42:01 spark-01 kernel: ",  # journalctl short, syslog
        "Mar 21 21:42:01.123456 spark-01 kernel: ",  # short-precise
        "Mar  3 06:24:16 wendy kernel: [1588862.292994] ",  # syslog with the kernel's time
        "2026-09-14T14:02:21+0000 spark-01 kernel: ",  # short-iso
        "2026-09-14T14:02:21.123456+00:00 spark-01 kernel: ",  # short-iso-precise
        "[   12.345678] spark-01 kernel: ",  # short-monotonic
        "Jun 06 15:45:40 [kernel] [ 1596.567501] ",  # metalog
        "Jan  1 00:00:00 host kernel:[   44.947000] ",  # syslog, no space after "kernel:"
        "2024-07-02 18:46:08.681559 kernel:[   21.766727] ",
        " kernel:[   44.916169] ",  # syslogd's wall relay ("Message from syslogd@...")
        "déc. 08 12:07:18 bestosprec kernel: ",  # another locale
        "11月 15 14:15:47 leon-NF5468M6 kernel: ",
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: ",  # Talos
        "2026-04-22T21:27:51.291660856Z stdout F ",  # CRI container log
    ],
)
def test_every_prefix_is_peeled(prefix: str) -> None:
    assert kernel_message(prefix + MSG) == MSG


def test_stack_frames_keep_their_indent_and_messages_their_brackets() -> None:
    assert kernel_message("[  155.441404]  uvm_release+0x151/0x160 [nvidia_uvm]") == (
        " uvm_release+0x151/0x160 [nvidia_uvm]"
    )
    frame = "Jun 06 15:45:40 [kernel] [ 1596.567494]  [<ffffffff81049bd6>] cpu_idle+0xa6/0xc0"
    assert kernel_message(frame) == " [<ffffffff81049bd6>] cpu_idle+0xa6/0xc0"
    drm = "[drm:nv_drm_load [nvidia_drm]] *ERROR* [nvidia-drm] Failed to allocate NvKmsKapiDevice"
    assert kernel_message(drm) == drm
    assert kernel_message("Oops: 0000 [#1] SMP") == "Oops: 0000 [#1] SMP"
