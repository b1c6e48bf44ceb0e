import json
from collections.abc import Callable
from pathlib import Path

from agent.state import SEQ_BLOCK, AgentState, clock_floor
from tests.support.tmpfs import fill

BOOT = "4f0e7b3a-2c6d-4d1e-9a57-8b1f3c2e9d10"


def test_seq_continues_across_restart_without_write_per_record(tmp_path: Path) -> None:
    state = AgentState(tmp_path, "spark-01", BOOT)
    before = (tmp_path / "state.json").stat()
    seqs = [state.next_seq("lines") for _ in range(1000)]
    assert seqs == list(range(1, 1001))
    after = (tmp_path / "state.json").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    # kill -9 here: nothing more is persisted; the restart continues past every seq used
    restarted = AgentState(tmp_path, "spark-01", BOOT)
    nxt = restarted.next_seq("lines")
    assert nxt == 1 + SEQ_BLOCK > seqs[-1]
    assert restarted.next_seq("samples") == 1 + SEQ_BLOCK
    assert restarted.next_seq("lines") == nxt + 1


def test_crossing_a_block_persists_a_new_high_water(tmp_path: Path) -> None:
    state = AgentState(tmp_path, "spark-01", BOOT)
    for _ in range(SEQ_BLOCK + 5):
        last = state.next_seq("events")
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["seq_reserved"]["events"] > last
    assert AgentState(tmp_path, "spark-01", BOOT).next_seq("events") > last


def test_new_boot_starts_over_and_remembers_previous(tmp_path: Path) -> None:
    state = AgentState(tmp_path, "spark-01", BOOT)
    state.next_seq("lines")
    state.kseq_acked = 812
    state.save()
    same = AgentState(tmp_path, "spark-01", BOOT)
    assert same.kseq_acked == 812
    other = AgentState(tmp_path, "spark-01", "new-boot")
    assert other.next_seq("lines") == 1
    assert other.kseq_acked is None
    assert other.previous_boot_id == BOOT


def test_corrupt_state_file_is_not_fatal_and_reuses_no_seq(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    state = AgentState(tmp_path, "spark-01", BOOT, wall=lambda: 1764400000.0)
    assert state.next_seq("lines") == clock_floor(1764400000.0)  # past any seq ever used
    assert not (tmp_path / "state.json.tmp").exists()


def test_state_is_saved_in_place_on_a_full_disk(small_disk: Callable[[str], Path]) -> None:
    disk = small_disk("256k")
    state = AgentState(disk, "spark-01", BOOT)
    fill(disk)
    state.kseq_acked = 4242
    state.drops.add({"lines": 7}, ["disk_full"], 1764400000.0)
    assert state.save() is True  # no temp copy fits: the padded file is overwritten
    again = AgentState(disk, "spark-01", BOOT)
    assert again.kseq_acked == 4242 and again.drops.totals["lines"] == 7
    assert not (disk / "state.json.tmp").exists()


def test_start_on_a_full_disk_never_reuses_a_seq(small_disk: Callable[[str], Path]) -> None:
    disk = small_disk("256k")
    fill(disk)  # no state file could ever be written
    wall = [1764400000.0]
    first = AgentState(disk, "spark-01", BOOT, wall=lambda: wall[0])
    assert first.save_failed
    used = [first.next_seq("lines") for _ in range(SEQ_BLOCK + 10)]  # crosses a block, too
    wall[0] += 1.0  # kill -9, restarted a second later, the disk still full
    second = AgentState(disk, "spark-01", BOOT, wall=lambda: wall[0])
    assert second.next_seq("lines") > used[-1]
    assert len(set(used)) == len(used)
