"""The real agent process against the in-test collector: kill -9, restart, SIGTERM."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import FIXTURES, TOKEN, FakeCollector, wait_for

ROOT = Path(__file__).resolve().parents[2]
BOOT = (FIXTURES / "proc/sys/kernel/random/boot_id").read_text().strip()


def start_agent(
    collector: FakeCollector, tmp_path: Path, kmsg: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZEWATCH_AGENT_TOKEN": TOKEN}
    cmd = [
        sys.executable,
        "-m",
        "agent",
        "--collector",
        collector.url,
        "--host-name",
        "spark-test",
        "--interval",
        "0.2",
        "--proc-root",
        str(FIXTURES / "proc"),
        "--kmsg",
        str(kmsg or tmp_path / "kmsg"),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def append_records(path: Path, kseqs: range) -> None:
    with open(path, "ab") as f:
        for k in kseqs:
            f.write(b"6,%d,%d,-;record %d\n SUBSYSTEM=test\n" % (k, 1000 + k, k))


def test_kill_9_mid_stream_then_restart_no_duplicate_no_gap(
    collector: FakeCollector, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    kmsg = tmp_path / "kmsg"
    append_records(kmsg, range(0, 50))
    procs.append(start_agent(collector, tmp_path))
    wait_for(lambda: len(collector.kseqs.get(BOOT, [])) >= 50)

    done = threading.Event()

    def writer() -> None:  # the kernel keeps logging while the agent dies and restarts
        for k in range(50, 400):
            append_records(kmsg, range(k, k + 1))
            time.sleep(0.002)
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    wait_for(lambda: len(collector.kseqs.get(BOOT, [])) >= 120)
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(10)
    procs.append(start_agent(collector, tmp_path))
    done.wait(30)
    wait_for(lambda: len(collector.kseqs.get(BOOT, [])) >= 400)
    kseqs = collector.kseqs[BOOT]
    assert kseqs == list(range(400))  # every record once, in kernel order
    assert collector.duplicate_kseqs == 0
    assert len(collector.events("agent_started")) == 2
    lines = collector.stream("lines")
    assert lines[7]["fields"]["SUBSYSTEM"] == "test" and lines[7]["text"] == "record 7"
    seqs = [ln["seq"] for ln in lines]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # seq survives the restart


def test_sigterm_sends_agent_stopping_and_exits_0(
    collector: FakeCollector, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    append_records(tmp_path / "kmsg", range(5))
    procs.append(start_agent(collector, tmp_path))
    wait_for(
        lambda: len(collector.stream("samples")) >= 2 and len(collector.kseqs.get(BOOT, [])) == 5
    )
    sample = collector.stream("samples")[0]
    assert sample["mem"]["MemAvailable"] == 4870216 * 1024
    assert sample["psi"]["memory"]["full"]["avg10"] == 35.6
    assert collector.batches[0]["host"] == "spark-test"
    procs[0].send_signal(signal.SIGTERM)
    assert procs[0].wait(30) == 0
    (stopping,) = collector.events("agent_stopping")
    assert stopping["data"] == {"shutdown": False}
    assert collector.batches[-1]["events"][-1]["kind"] == "agent_stopping"
    # the next run in the same boot continues seq and skips shipped kernel records
    procs.append(start_agent(collector, tmp_path))
    wait_for(lambda: len(collector.events("agent_started")) == 2)
    append_records(tmp_path / "kmsg", range(5, 6))
    wait_for(lambda: 5 in collector.kseqs[BOOT])
    assert collector.kseqs[BOOT] == [0, 1, 2, 3, 4, 5] and collector.duplicate_kseqs == 0


def test_collector_outage_spools_and_replays_in_order(
    collector: FakeCollector, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    kmsg = tmp_path / "kmsg"
    append_records(kmsg, range(0, 10))
    procs.append(start_agent(collector, tmp_path))
    wait_for(lambda: len(collector.kseqs.get(BOOT, [])) == 10)
    collector.stop()
    append_records(kmsg, range(10, 60))
    spool = tmp_path / "state/spool"
    wait_for(lambda: any(spool.glob("*.seg")))  # the outage is spooled, not held in memory
    samples_before = len(collector.stream("samples"))
    collector.start()
    wait_for(lambda: len(collector.kseqs.get(BOOT, [])) == 60)
    assert collector.kseqs[BOOT] == list(range(60)) and collector.duplicate_kseqs == 0
    wait_for(lambda: not any(spool.glob("*.seg")))
    assert len(collector.stream("samples")) > samples_before  # samples from inside the gap


def test_a_record_written_into_dev_kmsg_is_delivered(
    collector: FakeCollector, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """The real /dev/kmsg end to end (the agent reads it on its shipping thread; which thread
    is tested in test_threads and test_kmsg): a record written into it reaches the
    collector, and SIGTERM still ends the agent cleanly."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDWR | os.O_NONBLOCK)
    except OSError as exc:
        pytest.skip(f"/dev/kmsg cannot be read and written here: {exc}")
    tag = f"freezewatch-test {os.urandom(6).hex()}"
    try:
        procs.append(agent := start_agent(collector, tmp_path, Path("/dev/kmsg")))
        wait_for(lambda: any(e["kind"] == "agent_started" for e in collector.stream("events")))
        os.write(fd, f"<14>{tag}\n".encode())
    finally:
        os.close(fd)
    (found,) = wait_for(lambda: [ln for ln in collector.stream("lines") if tag in ln["text"]])
    assert found["source"] == "kmsg" and isinstance(found["kseq"], int)
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(30) == 0
    assert collector.stream("events")[-1]["kind"] == "agent_stopping"
