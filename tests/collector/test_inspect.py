"""Offline inspection of saved kernel and vLLM logs, in every input shape."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collector.inspect import add_inspect_parser, inspect_kernel_log, inspect_vllm_log, run_inspect
from collector.vllm.plan import PLAN_FIELDS

ROOT = Path(__file__).resolve().parents[2]
KERNEL = Path(__file__).parent.parent / "fixtures" / "kernel"
VLLM = Path(__file__).parent.parent / "fixtures" / "vllm"
KEYS = [
    "kind",
    "code",
    "device",
    "xid",
    "pci",
    "pid",
    "process",
    "module",
    "meaning",
    "severity",
    "action",
    "line_no",
    "text",
]
REAL_PSTORE = Path(__file__).parent.parent / "fixtures" / "real" / "pstore"
REAL_VLLM = Path(__file__).parent.parent / "fixtures" / "real" / "vllm"


def _summary(name: str) -> list[tuple]:
    return [(e["kind"], e["xid"], e["line_no"]) for e in inspect_kernel_log(KERNEL / name)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "dmesg_monotonic.txt",
            [
                ("xid", 13, 7),
                ("xid", 13, 8),
                ("nv_err", None, 9),
                ("xid", 119, 10),
                ("xid", 120, 11),
                ("soft_lockup", None, 12),
                ("hung_task", None, 13),
            ],
        ),
        (
            "dmesg_ctime.txt",  # "GPU ...: GPU has fallen off the bus." restates the Xid 79
            [("xid", 79, 2), ("oom_kill", None, 5), ("oom_kill", None, 6)],
        ),
        ("dmesg_iso.txt", [("bus_off", None, 3), ("rcu_stall", None, 4)]),
        ("journal_short.txt", [("alloc_failure", None, 2), ("gsp", None, 4), ("gsp", None, 7)]),
        ("journal_short_iso.txt", [("nv_err", None, 1), ("xid", 154, 2)]),
        ("journal_export.json", [("xid", 119, 2), ("nv_err", None, 3)]),
        ("kmsg_raw.txt", [("nv_err", None, 2), ("xid", 31, 5)]),
        ("bare.txt", [("xid", 48, 1), ("xid", 43, 2), ("oom_kill", None, 4)]),
    ],
)
def test_each_input_style(name: str, expected: list[tuple]) -> None:
    assert _summary(name) == expected


def test_json_keys_exact_and_prefix_stripped() -> None:
    events = inspect_kernel_log(KERNEL / "dmesg_monotonic.txt")
    assert all(list(e) == KEYS for e in events)
    gsp = events[3]
    assert gsp["text"].startswith("NVRM: Xid (PCI:000f:01:00): 119, pid=3849, name=KMS thread,")
    assert (gsp["pci"], gsp["pid"], gsp["process"]) == ("000f:01:00", 3849, "KMS thread")
    assert (gsp["code"], gsp["device"], gsp["severity"], gsp["action"]) == (
        "119",
        "000f:01:00",
        "fatal",
        "reset_gpu",
    )


def test_kmsg_dictionary_continuation_is_one_record() -> None:
    [nv_err, xid] = inspect_kernel_log(KERNEL / "kmsg_raw.txt")
    assert nv_err["text"].splitlines()[1:] == ["SUBSYSTEM=pci", "DEVICE=+pci:000f:01:00.0"]
    assert xid["line_no"] == 5 and xid["pid"] == 4121


def test_indented_continuation_carries_the_event(tmp_path: Path) -> None:
    log = tmp_path / "cont.txt"
    log.write_text(
        "Nov 03 10:00:00 spark-01 kernel: usb 1-1: new device\n"
        "Nov 03 10:00:01 spark-01 kernel: NVRM: nvCheckOkFailedNoLog: Check failed:\n"
        "                                  Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
        "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359\n"
        "Nov 03 10:00:02 spark-01 kernel: eth0: link up\n"
    )
    [event] = inspect_kernel_log(log)
    assert (event["kind"], event["line_no"], event["meaning"]) == ("nv_err", 2, "Out of memory")
    assert len(event["text"].splitlines()) == 2


def test_a_paste_indented_as_a_whole_keeps_each_line_a_record(tmp_path: Path) -> None:
    """A report pasted with every line indented alike (sonic-buildimage#17358): no line
    continues another, so the soft lockup and the panic it triggers are two events, each on
    its own line; a continuation is indented deeper than the line it continues."""
    pad = " " * 18
    log = tmp_path / "indented.txt"
    log.write_text(
        f"{pad}[ 5300.229390] watchdog: BUG: soft lockup - CPU#2 stuck for 23s! "
        "[kworker/2:1:25629]\n"
        f"{pad}[ 5300.237965] Kernel panic - not syncing: softlockup: hung tasks\n"
        f"{pad}[ 5300.244482] CPU: 2 PID: 25629 Comm: kworker/2:1 Tainted: G OEL "
        "5.10.0-18-2-amd64 #1 Debian 5.10.140-1\n"
        f"{pad}[ 5300.273855]  dump_stack+0x6b/0x83\n"
    )
    events = inspect_kernel_log(log)
    assert [(e["line_no"], e["kind"], e["code"]) for e in events] == [
        (1, "soft_lockup", "soft"),
        (2, "oops", "panic"),
    ]
    assert events[0]["pid"] == 25629 and len(events[1]["text"].splitlines()) == 1


def test_an_indented_line_with_its_own_time_is_a_record_not_a_continuation(
    tmp_path: Path,
) -> None:
    """A continuation (dmesg's, the journal's, a kmsg dictionary line) never carries a time of
    its own: an indented line that does is the next record, however deep. Constructed sequence
    of real lines (the corpus' hung-tasks-4x-5x-wordings.txt: an unindented capture's last
    line, then raspberrypi/linux#2557's report pasted four spaces deep); before, the paste was
    one record with that last line, its hung task's event on line 1."""
    log = tmp_path / "paste.txt"
    log.write_text(
        "[81770.156539] [<c0882f18>] (__schedule) from [<c0883858>] (schedule+0x64/0xe4)\n"
        "    May 17 18:48:11 kernel: [ 6141.921740] INFO: task kworker/u8:0:5 blocked for "
        "more than 120 seconds.\n"
        "    May 17 18:48:11 kernel: [ 6141.921764]       Tainted: G         C      "
        "4.14.17-v7+ #1090\n"
    )
    [event] = inspect_kernel_log(log)
    assert (event["line_no"], event["kind"], event["pid"]) == (2, "hung_task", 5)
    assert "INFO: task kworker/u8:0:5 blocked" in event["text"]
    assert len(event["text"].splitlines()) == 1
    # constructed: a kmsg record pasted as deep; its dictionary line still continues it
    kmsg = tmp_path / "kmsg.txt"
    kmsg.write_text(
        "[81770.156539] [<c0882f18>] (__schedule) from [<c0883858>] (schedule+0x64/0xe4)\n"
        "    6,339,5140900,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n"
        "     SUBSYSTEM=pci\n"
    )
    [xid] = inspect_kernel_log(kmsg)
    assert xid["line_no"] == 2 and xid["text"].splitlines()[1:] == ["SUBSYSTEM=pci"]


def test_a_wall_broadcast_event_is_on_its_kernel_line(tmp_path: Path) -> None:
    """syslogd's heading is no part of the kernel line it relays: the event is on its own
    line, with its own text (tenstorrent/tt-metal#20143)."""
    log = tmp_path / "wall.txt"
    log.write_text(
        "Message from syslogd@tt-metal-ci-vm-217 at Apr 22 16:14:35 ...\n"
        " kernel:[  592.970198] watchdog: BUG: soft lockup - CPU#4 stuck for 23s! "
        "[kworker/4:2:1096]\n"
    )
    [event] = inspect_kernel_log(log)
    assert (event["kind"], event["line_no"], event["pid"]) == ("soft_lockup", 2, 1096)
    assert "Message from syslogd" not in event["text"]


def test_each_line_a_wall_broadcast_relays_is_its_own_record(tmp_path: Path) -> None:
    # Several kernel lines under one heading (soft-lockups-various.txt): one event each.
    log = tmp_path / "wall.txt"
    log.write_text(
        "Message from syslogd@localhost at Apr 15 10:22:13 ...\n"
        " kernel:NMI watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [java:102195]\n"
        " kernel:NMI watchdog: BUG: soft lockup - CPU#1 stuck for 33s! [java:81590]\n"
    )
    events = inspect_kernel_log(log)
    assert [(e["line_no"], e["pid"]) for e in events] == [(2, 102195), (3, 81590)]


def test_a_wall_heading_captured_raw_starts_with_the_bell(tmp_path: Path) -> None:
    # Constructed: a raw capture of rsyslog's wall message rings the terminal bell before the
    # heading (tt-metal#20143's heading and line, with the BEL a pasted copy drops).
    log = tmp_path / "wall.txt"
    log.write_text(
        "\aMessage from syslogd@tt-metal-ci-vm-217 at Apr 22 16:14:35 ...\n"
        " kernel:[  592.970198] watchdog: BUG: soft lockup - CPU#4 stuck for 23s! "
        "[kworker/4:2:1096]\n"
    )
    [event] = inspect_kernel_log(log)
    assert (event["kind"], event["line_no"]) == ("soft_lockup", 2)
    assert "Message from syslogd" not in event["text"]


def test_journal_json_byte_array_message() -> None:
    events = inspect_kernel_log(KERNEL / "journal_export.json")
    assert events[1]["text"].startswith("NVRM: nvCheckOkFailedNoLog")


def test_a_json_line_that_is_no_journal_entry_is_read_as_its_text(tmp_path: Path) -> None:
    """A JSON log of another tool (a health monitor quoting the journal's ``MESSAGE=`` field,
    NVIDIA/NVSentinel#1475, shortened here) is no journal entry: read as text, as ingest reads
    each line, not dropped. A journal entry with an empty message stays empty."""
    log = tmp_path / "monitor.log"
    log.write_text(
        '{"time":"2026-07-10T08:41:31.076382647Z","level":"INFO","msg":"Attempting to send '
        'health event","module":"syslog-health-monitor","events":{"events":[{"message":'
        '"MESSAGE=NVRM: Xid (PCI:000b:00:00): 13, pid=3737626, name=xid_trigger, Graphics '
        'Exception: ChID 000a, Class 0000c6c0, Offset 00000510, Data 0017e2ac"}]}}\n'
        '{"MESSAGE": "", "SYSLOG_IDENTIFIER": "kernel", "NVRM": "Xid (PCI:0000:01:00): 79"}\n'
    )  # constructed: the second line is a journal entry whose message is empty
    [event] = inspect_kernel_log(log)
    assert (event["kind"], event["xid"], event["line_no"]) == ("xid", 13, 1)


def test_vllm_json_keys_exact() -> None:
    result = inspect_vllm_log(VLLM / "v0.33.0_restart_fail_then_start.log")
    assert list(result) == ["starts", "hang_signals"]
    plans = result["starts"]
    assert [list(p) for p in plans] == [list(PLAN_FIELDS)] * 2
    assert [p["outcome"] for p in plans] == ["failed", "started"]
    json.dumps(result)  # serialisable as is


def test_vllm_hang_signals_with_their_phase() -> None:
    result = inspect_vllm_log(REAL_VLLM / "omni-2928-serving-then-shm-hang.log")
    [signal] = result["hang_signals"]
    assert (signal["signal"], signal["phase"], signal["start"]) == (
        "shm_broadcast_timeout",
        "serving",
        1,
    )
    assert signal["line_no"] == 5  # the header lines count: line numbers are the file's
    code, text = _run(
        ["inspect", "vllm-log", str(REAL_VLLM / "omni-2928-serving-then-shm-hang.log")]
    )
    assert code == 0
    assert "hang signal line 5: shm_broadcast_timeout (start 1, phase serving)" in text


def _run(argv: list[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="freezewatch-collector")
    add_inspect_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    out = io.StringIO()
    return run_inspect(args, out=out), out.getvalue()


def test_pstore_files_are_kernel_logs() -> None:
    [panic] = inspect_kernel_log(REAL_PSTORE / "dmesg-erst-7530486857247752193")
    assert (panic["kind"], panic["code"], panic["module"]) == ("oops", "panic", "crash_test")
    [oops] = inspect_kernel_log(REAL_PSTORE / "dmesg-erst-sysrq-oops")
    assert (oops["kind"], oops["code"], oops["module"]) == ("oops", "oops", None)
    assert "sysrq_handle_crash" in oops["meaning"]


def test_cli_json_and_human_output() -> None:
    code, text = _run(["inspect", "kernel-log", str(KERNEL / "kmsg_raw.txt"), "--json"])
    assert code == 0 and [e["kind"] for e in json.loads(text)] == ["nv_err", "xid"]
    assert [e["action"] for e in json.loads(text)] == ["restart_app", "restart_app"]
    code, text = _run(["inspect", "kernel-log", str(KERNEL / "kmsg_raw.txt")])
    assert code == 0 and "line 5: xid 31" in text and "2 event(s)" in text
    assert "severity error, action restart_app" in text and "device=000f:01:00" in text
    code, text = _run(["inspect", "vllm-log", str(VLLM / "v0.20.2_mtp_gb10.log")])
    assert code == 0 and "negative estimate" in text and "loading_drafter" in text
    code, text = _run(["inspect", "vllm-log", str(VLLM / "v0.20.2_mtp_gb10.log"), "--json"])
    assert json.loads(text)["starts"][0]["cuda_graph_estimate_gib"] == -0.9


def test_human_output_lists_the_configuration_the_log_states() -> None:
    """Only in the human output: the --json keys stay exactly the contract's."""
    log = REAL_VLLM / "v0.23-spark-296-logo-dflash-args.log"
    code, text = _run(["inspect", "vllm-log", str(log)])
    stated = text.split("configuration the log states:\n", 1)[1].split("  phases:", 1)[0]
    rows = dict(line.split() for line in stated.splitlines())
    assert code == 0
    assert rows["tensor_parallel_size"] == "2" and rows["speculative_method"] == "dflash"
    assert rows["num_speculative_tokens"] == "5" and "quantization" not in rows
    code, text = _run(["inspect", "vllm-log", str(log), "--json"])
    assert "tensor_parallel_size" not in json.loads(text)["starts"][0]


def test_cli_missing_file() -> None:
    code, _ = _run(["inspect", "kernel-log", "/nonexistent/kern.log"])
    assert code == 2


def test_vllm_log_header_comments_are_not_log(tmp_path: Path) -> None:
    # An annotated capture's leading "#" lines quote the error in prose: not the start's error.
    log = tmp_path / "annotated.log"
    err = "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above."
    note = '# what: the API server giving up, "Engine core initialization failed"'
    log.write_text(f"# source: https://example.org/1\n{note}\n{err}\n# not a header here\n")
    [start] = inspect_vllm_log(log)["starts"]
    assert (start["outcome"], start["error"]) == ("failed", err)
    assert start["phases"][-1]["line_no"] == 3


def test_output_piped_into_a_reader_that_left_is_no_traceback() -> None:
    """`freezewatch-collector inspect ... --json | head -c 300`: the pipe closes under the
    command; it stops quietly instead of printing a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "collector", "inspect", "kernel-log", "--json",
             str(KERNEL / "dmesg_monotonic.txt")],
            stdout=write_end, stderr=subprocess.PIPE, cwd=ROOT, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.returncode == 1


def test_a_broken_pipe_that_is_not_stdout_is_no_quiet_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command whose own connection breaks (an SSH channel, a socket to a server that left)
    raises BrokenPipeError too; stdout is fine, so that is an error to show, not a reader gone."""
    from collector import cli

    def broken(_args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "Broken pipe")  # constructed: a socket's send to a dead peer

    monkeypatch.setitem(cli.COMMANDS, "inspect", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["inspect", "kernel-log", str(KERNEL / "dmesg_monotonic.txt")])
