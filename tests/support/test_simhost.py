"""The simulated host's proc tree: real formats, and a cold start the charts can tell apart."""

from __future__ import annotations

import random
from pathlib import Path

from agent.sources.proc import parse_loadavg, parse_meminfo, parse_pressure, parse_vmstat
from tests.support.simhost import (
    LOAD_CURVE,
    HostModel,
    append_kmsg,
    interpolate,
    journal_entries,
    kmsg_record,
)


def run(
    model: HostModel, seconds: int, *, since_vllm: float | None, to_freeze: float | None
) -> list[dict[str, str]]:
    return [model.tick(1.0, since_vllm, to_freeze, float(n)) for n in range(seconds)]


def test_files_parse_with_the_agent_parsers() -> None:
    files = HostModel(20.0, random.Random(1)).tick(1.0, since_vllm=9.0, to_freeze=None, t=0.0)
    mem = parse_meminfo(files["meminfo"])
    assert mem["MemTotal"] == 127_606_688 * 1024
    assert 0 < mem["MemAvailable"] < mem["MemTotal"] and mem["SwapFree"] <= mem["SwapTotal"]
    for resource in ("memory", "cpu", "io"):
        assert set(parse_pressure(files[f"pressure/{resource}"])) == {"some", "full"}
    assert {"pgmajfault", "pswpin", "allocstall", "compact_stall"} <= set(
        parse_vmstat(files["vmstat"])
    )
    assert parse_loadavg(files["loadavg"])["1"] >= 0


def test_drafter_load_collapses_memory_raises_psi_and_recovers() -> None:
    model = HostModel(20.0, random.Random(2))
    idle = parse_meminfo(model.tick(1.0, since_vllm=None, to_freeze=None, t=0.0)["meminfo"])
    # 0.52 of the load is the drafter moment: hold there, then serve
    squeezed = run(model, 12, since_vllm=10.4, to_freeze=None)[-1]
    served = run(model, 60, since_vllm=100.0, to_freeze=None)[-1]
    avail = [parse_meminfo(f["meminfo"])["MemAvailable"] for f in (squeezed, served)]
    assert avail[0] < 6 * 2**30 < avail[1] < idle["MemAvailable"]
    psi = [parse_pressure(f["pressure/memory"])["some"]["avg10"] for f in (squeezed, served)]
    assert psi[0] > 20.0 and psi[1] < 1.0


def test_run_up_to_a_freeze_squeezes_memory_and_swaps() -> None:
    model = HostModel(20.0, random.Random(3))
    last = run(model, 15, since_vllm=100.0, to_freeze=0.0)[-1]
    mem = parse_meminfo(last["meminfo"])
    assert mem["MemAvailable"] < 2 * 2**30 and mem["SwapFree"] < mem["SwapTotal"]


def test_interpolate_is_flat_outside_the_curve() -> None:
    assert interpolate(LOAD_CURVE, -1.0) == LOAD_CURVE[0][1]
    assert interpolate(LOAD_CURVE, 5.0) == LOAD_CURVE[-1][1]
    assert interpolate(((0.0, 0.0), (1.0, 10.0)), 0.25) == 2.5


def test_kmsg_records_and_their_journal_copy(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_record(6, 0, "Machine model: NVIDIA DGX Spark", usec=5_000_000))
    append_kmsg(kmsg, 0, "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python3:42]")
    lines = kmsg.read_text().splitlines()
    assert lines[1].startswith("0,1,") and lines[1].endswith("[python3:42]")
    entries = journal_entries(kmsg, "0f2c7a8e-1111-2222-3333-444455556666")
    assert entries[0]["MESSAGE"] == "Machine model: NVIDIA DGX Spark"
    assert entries[0]["_BOOT_ID"] == "0f2c7a8e111122223333444455556666"
    assert entries[0]["_SOURCE_MONOTONIC_TIMESTAMP"] == "5000000"
    assert [e["PRIORITY"] for e in entries] == ["6", "0"]
