"""Boot-aware catch-up: the previous boot's journal tail and pstore files, exactly once."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agent import catchup
from agent.catchup import CatchupPlan, journal_kernel_line, prepare, run_catchup
from collector.schemas import Batch

from .conftest import FakeCollector, wait_for
from .test_wiring import _config, _run_agent, _stop

OLD_BOOT = "11111111-2222-3333-4444-555555555555"
OLD_HEX = OLD_BOOT.replace("-", "")
USEC_ACKED = 4_200_000  # record 41 of the stand-in journal
LINES_RESERVED = 100_050
PANIC = "Kernel panic - not syncing: hung_task: blocked tasks"


def journal_entries() -> list[dict[str, Any]]:
    """What ``journalctl -b X -k -o json`` prints for boot X (one stray record of another)."""
    entries = []
    for i in range(60):
        usec = 100_000 * (i + 1)
        entries.append(
            {
                "__CURSOR": f"s=abc;i={i:x};b={OLD_HEX}",
                "__REALTIME_TIMESTAMP": str(1_764_400_000_000_000 + usec + 50),
                "__MONOTONIC_TIMESTAMP": str(usec + 50),
                "_SOURCE_MONOTONIC_TIMESTAMP": str(usec),
                "_BOOT_ID": OLD_HEX,
                "_TRANSPORT": "kernel",
                "PRIORITY": "3" if i == 55 else "6",
                "SYSLOG_FACILITY": "0",
                "SYSLOG_IDENTIFIER": "kernel",
                "MESSAGE": f"old boot record {i}",
            }
        )
    entries[50]["MESSAGE"] = list(b"NVRM: bytes \xff record 50")  # non-UTF-8: a byte array
    entries[51]["_KERNEL_SUBSYSTEM"] = "pci"
    entries[52]["_BOOT_ID"] = "ffffffffffffffffffffffffffffffff"  # not boot X: never shipped
    return entries


def write_journalctl(tmp_path: Path) -> Path:
    """A stand-in ``journalctl`` printing boot X's kernel records and logging its argv."""
    data = tmp_path / "journal.json"
    data.write_text("\n".join(json.dumps(e) for e in journal_entries()) + "\n")
    script = tmp_path / "journalctl"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(tmp_path / 'journalctl.argv')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"sys.stdout.write(open({str(data)!r}).read())\n"
    )
    script.chmod(0o755)
    return script


def write_pstore(tmp_path: Path) -> Path:
    pstore = tmp_path / "pstore"
    (pstore / "1764400000").mkdir(parents=True)
    (pstore / "dmesg-efi-176440000001001").write_text(
        f"Panic#1 Part1\n<0>[ 4.300000] {PANIC}\n\n<4>[ 4.300100] CPU: 3 PID: 77 Comm: khungtaskd\n"
    )
    (pstore / "1764400000" / "dmesg-efi-176440000002001").write_text("Oops#1 Part1\nline two\n")
    return pstore


def write_old_state(state_dir: Path, host: str = "spark-test") -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "host": host,
        "boot_id": OLD_BOOT,
        "kseq_acked": 41,
        "kmsg_usec_acked": USEC_ACKED,
        "seq_reserved": {"samples": 100_001, "lines": LINES_RESERVED, "events": 100_010},
    }
    (state_dir / "state.json").write_text(json.dumps(state))


def test_journal_record_mapping() -> None:
    entry = journal_entries()[50]
    usec, line = journal_kernel_line(entry, OLD_BOOT) or (None, None)
    assert usec == 5_100_000
    assert line == {
        "ts": 1_764_400_005.1,
        "source": "kmsg",
        "priority": 6,
        "facility": 0,
        "text": "NVRM: bytes \ufffd record 50",
        "fields": {"_SOURCE_MONOTONIC_TIMESTAMP": "5100000", "via": "journal"},
    }
    assert journal_kernel_line(journal_entries()[52], OLD_BOOT) is None
    no_source = {
        k: v for k, v in journal_entries()[3].items() if k != "_SOURCE_MONOTONIC_TIMESTAMP"
    }
    assert journal_kernel_line(no_source, OLD_BOOT)[0] == 400_050  # reception time instead


def test_previous_boot_is_caught_up_once(tmp_path: Path, collector: FakeCollector) -> None:
    journalctl = write_journalctl(tmp_path)
    write_pstore(tmp_path)
    write_old_state(tmp_path / "state")
    config = _config(
        tmp_path, collector, extra=["--canary-interval", "0", "--journalctl", str(journalctl)]
    )
    stop, thread = _run_agent(config)
    wait_for(lambda: len(collector.events("agent_started")) == 1)
    _stop(stop, thread)
    old = [b for b in collector.batches if b["boot_id"] == OLD_BOOT]
    assert old and collector.batches[0]["boot_id"] == OLD_BOOT  # before the present
    for batch in old:  # what the real collector would accept
        Batch.model_validate(batch)
    lines = [ln for b in old for ln in b["lines"]]
    texts = [ln["text"] for ln in lines]
    kernel = [ln for ln in lines if ln["source"] == "kmsg"]
    expected = [f"old boot record {i}" for i in range(42, 60) if i not in (50, 52)]
    assert [t for t in texts if t.startswith("old boot")] == expected
    assert "NVRM: bytes \ufffd record 50" in texts
    assert len(kernel) == 17 and all("kseq" not in ln for ln in kernel)
    assert kernel[9]["fields"]["SUBSYSTEM"] == "pci"
    assert [ln["seq"] for ln in lines] == list(range(LINES_RESERVED, LINES_RESERVED + len(lines)))
    pstore = [ln for ln in lines if ln["source"] == "journal"]
    assert [(ln["fields"]["pstore_file"], ln["text"]) for ln in pstore] == [
        ("dmesg-efi-176440000001001", "Panic#1 Part1"),
        ("dmesg-efi-176440000001001", f"<0>[ 4.300000] {PANIC}"),
        ("dmesg-efi-176440000001001", "<4>[ 4.300100] CPU: 3 PID: 77 Comm: khungtaskd"),
        ("1764400000/dmesg-efi-176440000002001", "Oops#1 Part1"),
        ("1764400000/dmesg-efi-176440000002001", "line two"),
    ]  # fmt: skip
    (info,) = [e for b in old for e in b["events"]]
    assert info["seq"] == 100_010 and info["data"]["source"] == "catchup"
    assert info["data"]["after_kseq"] == 41
    assert (tmp_path / "journalctl.argv").read_text() == f"-b {OLD_HEX} -k -o json --no-pager\n"
    assert not (tmp_path / "state" / catchup.PLAN_FILE).exists()

    # a second start (same boot now) sends nothing of boot X again
    stop, thread = _run_agent(config)
    wait_for(lambda: len(collector.events("agent_started")) == 2)
    _stop(stop, thread)
    assert [b for b in collector.batches if b["boot_id"] == OLD_BOOT] == old
    assert (tmp_path / "journalctl.argv").read_text().count("\n") == 1


def test_interrupted_catchup_resends_with_the_same_seqs(tmp_path: Path) -> None:
    journalctl = write_journalctl(tmp_path)
    pstore = write_pstore(tmp_path)
    state_dir = tmp_path / "state"
    write_old_state(state_dir)
    plan = prepare(state_dir, "spark-test", "new-boot")
    assert plan == CatchupPlan("spark-test", OLD_BOOT, 41, USEC_ACKED, LINES_RESERVED, 100_010)
    (state_dir / "state.json").write_text("{}")  # the new boot's AgentState overwrote it
    plan_copy = (state_dir / catchup.PLAN_FILE).read_bytes()
    first: list[dict[str, Any]] = []
    run_catchup(plan, deliver=first.append, agent_info={}, state_dir=state_dir,
                journalctl=str(journalctl), pstore_dirs=[pstore])  # fmt: skip
    # a crash after the sends but before the plan was dropped: the plan is found again
    (state_dir / catchup.PLAN_FILE).write_bytes(plan_copy)
    (state_dir / catchup.PSTORE_FILE).unlink()
    again_plan = prepare(state_dir, "spark-test", "new-boot")
    assert again_plan == plan
    second: list[dict[str, Any]] = []
    run_catchup(again_plan, deliver=second.append, agent_info={}, state_dir=state_dir,
                journalctl=str(journalctl), pstore_dirs=[pstore])  # fmt: skip

    def keys(batches: list[dict[str, Any]]) -> list[tuple[int, str]]:
        return [(ln["seq"], ln["text"]) for b in batches for ln in b["lines"]]

    assert keys(first) == keys(second) and len(keys(first)) == 22
    assert prepare(state_dir, "spark-test", "new-boot") is None  # done: nothing owed


def test_first_run_primes_pstore_and_owes_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    assert prepare(state_dir, "spark-test", "boot-y") is None
    pstore = write_pstore(tmp_path)
    catchup.prime_pstore(state_dir, [pstore])
    assert len(catchup.pstore_seen(state_dir) or ()) == 2
