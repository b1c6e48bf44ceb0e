import shutil
from pathlib import Path

from agent.outbox import Outbox
from agent.sampler import Sampler
from agent.sources.proc import (
    LoadSource,
    MemSource,
    PsiSource,
    VmstatSource,
    parse_vmstat,
    proc_sources,
    read_boot_id,
)

from .conftest import FIXTURES

PROC = FIXTURES / "proc"


def test_meminfo_all_fields_in_bytes() -> None:
    mem = MemSource(PROC).read()
    assert mem["MemTotal"] == 127606688 * 1024
    assert mem["MemAvailable"] == 4870216 * 1024
    assert mem["SwapFree"] == 9231104 * 1024
    assert mem["Active(anon)"] == 96523108 * 1024
    assert mem["HugePages_Total"] == 0  # unitless count, not scaled
    assert len(mem) == 54


def test_pressure_all_resources() -> None:
    psi = PsiSource(PROC).read()
    assert psi["memory"]["full"] == {
        "avg10": 35.6,
        "avg60": 15.12,
        "avg300": 4.02,
        "total": 80043310,
    }
    assert psi["cpu"]["some"]["avg10"] == 2.13
    assert psi["io"]["some"]["total"] == 51221947


def test_loadavg_and_boot_id() -> None:
    assert LoadSource(PROC).read() == {
        "1": 18.42,
        "5": 9.77,
        "15": 4.31,
        "running": 23,
        "total": 1874,
    }
    assert read_boot_id(PROC) == "4f0e7b3a-2c6d-4d1e-9a57-8b1f3c2e9d10"


def test_vmstat_allocstall_zones_summed() -> None:
    counters = parse_vmstat((PROC / "vmstat").read_text())
    assert counters["allocstall"] == 1207 + 3911


def test_vmstat_rates_per_second(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    shutil.copytree(PROC, root)
    now = [1000.0]
    src = VmstatSource(root, clock=lambda: now[0])
    first = src.read()
    assert first == dict.fromkeys(first)  # no previous sample: no rate yet
    text = (root / "vmstat").read_text()
    text = text.replace("pgmajfault 722118", "pgmajfault 722318")
    text = text.replace("allocstall_normal 1207", "allocstall_normal 1217")
    text = text.replace("oom_kill 3", "oom_kill 4")
    (root / "vmstat").write_text(text)
    now[0] = 1002.0
    rates = src.read()
    assert rates == {
        "pgmajfault": 100.0,
        "pswpin": 0.0,
        "pswpout": 0.0,
        "oom_kill": 0.5,
        "allocstall": 5.0,
        "compact_stall": 0.0,
    }


def test_sampler_builds_sample_from_fixture_tree() -> None:
    outbox = Outbox()
    sample = Sampler(proc_sources(PROC), outbox, wall=lambda: 1764400001.0).sample_once()
    assert sample is not None
    assert set(sample) == {"ts", "burst", "mem", "psi", "vmstat", "load"}
    assert sample["ts"] == 1764400001.0 and sample["burst"] is False
    samples, _, events = outbox.drain(100, 10**6)
    assert samples == [sample] and events == []


def test_missing_file_reported_once_never_fatal(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    shutil.copytree(PROC, root)
    (root / "loadavg").unlink()
    (root / "pressure/io").unlink()
    outbox = Outbox()
    sampler = Sampler(proc_sources(root), outbox, wall=lambda: 5.0)
    for _ in range(3):
        sample = sampler.sample_once()
        assert sample is not None and "load" not in sample
        assert set(sample["psi"]) == {"memory", "cpu"}  # the rest of PSI still ships
    _, _, events = outbox.drain(100, 10**6)
    assert sorted(e["data"]["source"] for e in events) == ["load", "psi"]
    assert all(e["kind"] == "source_error" for e in events)
    assert "pressure/io" in next(e for e in events if e["data"]["source"] == "psi")["data"]["error"]


def test_no_sample_without_meminfo(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    shutil.copytree(PROC, root)
    (root / "meminfo").unlink()
    outbox = Outbox()
    assert Sampler(proc_sources(root), outbox).sample_once() is None
    samples, _, events = outbox.drain(100, 10**6)
    assert samples == [] and [e["data"]["source"] for e in events] == ["mem"]
