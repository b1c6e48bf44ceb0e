"""Flags → sources, burst sampling, canary and netconsole wiring of the agent CLI."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import cli
from agent.burst import BurstController
from agent.config import DEFAULT_LABEL, AgentConfig, parse_args
from agent.outbox import Outbox
from agent.sampler import Sampler
from agent.sources import build_sources
from tests.support.docker_standin import DockerStandin

from .conftest import FIXTURES, TOKEN, FakeCollector, wait_for
from .test_gpu import fake_nvml

BASE = ["--collector", "http://c:1", "--token", "t", "--host-name", "h"]


def test_new_flags_default() -> None:
    cfg = parse_args(BASE, {})
    assert cfg.no_gpu is False
    assert cfg.vllm_url == () and cfg.container_name == () and cfg.vllm_log == ()
    assert cfg.docker_socket == "/var/run/docker.sock"
    assert cfg.container_label == DEFAULT_LABEL
    assert cfg.canary_interval == 10.0
    assert cfg.netconsole is None and cfg.netconsole_remove is False
    assert cfg.sys_root == Path("/")
    assert cfg.pstore_dir == (Path("/sys/fs/pstore"), Path("/var/lib/systemd/pstore"))


def test_repeatable_flags_and_empty_label() -> None:
    argv = [
        *BASE, "--vllm-url", "http://a:8000", "--vllm-url", "http://b:8001", "--no-gpu",
        "--container-label", "", "--container-name", "vllm", "--journal-unit", "vllm.service",
        "--vllm-log", "/var/log/vllm.log", "--canary-interval", "0",
    ]  # fmt: skip
    cfg = parse_args(argv, {})
    assert cfg.vllm_url == ("http://a:8000", "http://b:8001")
    assert cfg.no_gpu is True
    assert cfg.container_label is None  # empty disables label selection
    assert cfg.container_name == ("vllm",)
    assert cfg.journal_unit == ("vllm.service",)
    assert cfg.vllm_log == (Path("/var/log/vllm.log"),)
    assert cfg.canary_interval == 0.0


def test_env_variants() -> None:
    env = {
        "FREEZEWATCH_AGENT_COLLECTOR": "http://c:1",
        "FREEZEWATCH_AGENT_TOKEN": "t",
        "FREEZEWATCH_AGENT_VLLM_URL": "http://a:8000, http://b:8001",
        "FREEZEWATCH_AGENT_NO_GPU": "yes",
        "FREEZEWATCH_AGENT_CONTAINER_LABEL": "",
        "FREEZEWATCH_AGENT_CONTAINER_NAME": "vllm,vllm-2",
        "FREEZEWATCH_AGENT_NETCONSOLE": "10.0.0.1:6666",
        "FREEZEWATCH_AGENT_PSTORE_DIR": "/tmp/p1,/tmp/p2",
    }
    cfg = parse_args(["--vllm-url", "http://flag:1"], env)
    assert cfg.vllm_url == ("http://flag:1",)  # a flag replaces the env list
    assert cfg.no_gpu is True
    assert cfg.container_label is None
    assert cfg.container_name == ("vllm", "vllm-2")
    assert cfg.netconsole == "10.0.0.1:6666"
    assert cfg.pstore_dir == (Path("/tmp/p1"), Path("/tmp/p2"))
    assert parse_args([], {**env, "FREEZEWATCH_AGENT_NO_GPU": "0"}).no_gpu is False


def test_netconsole_remove_needs_no_collector() -> None:
    cfg = parse_args(["--netconsole-remove", "--sys-root", "/x"], {})
    assert cfg.netconsole_remove is True and cfg.sys_root == Path("/x")


@pytest.fixture
def docker(tmp_path: Path) -> Iterator[DockerStandin]:
    standin = DockerStandin(str(tmp_path / "docker.sock"))
    yield standin
    standin.close()


def test_flags_build_every_source(tmp_path: Path, docker: DockerStandin) -> None:
    argv = [
        *BASE, "--proc-root", str(FIXTURES / "proc"), "--vllm-url", "http://127.0.0.1:9",
        "--docker-socket", docker.socket_path, "--vllm-log", str(tmp_path / "v.log"),
        "--journal-unit", "vllm.service",
    ]  # fmt: skip
    cfg = parse_args(argv, {})
    sources = build_sources(cfg, nvml=fake_nvml())
    assert [s.name for s in sources.samples] == [
        "mem", "psi", "vmstat", "load", "gpu", "vllm", "containers"
    ]  # fmt: skip
    assert [s.name for s in sources.lines] == [
        "kmsg", "nvml_xid", "docker_logs", "vllm_log", "journal_unit"
    ]  # fmt: skip
    assert sources.infos == []
    containers = next(s for s in sources.samples if s.name == "containers")
    assert containers.read()  # the stand-in's labelled containers are seen


def test_absent_gpu_and_docker_become_infos(tmp_path: Path) -> None:
    cfg = parse_args([*BASE, "--no-gpu", "--docker-socket", str(tmp_path / "none.sock")], {})
    sources = build_sources(cfg)
    assert [s.name for s in sources.samples] == ["mem", "psi", "vmstat", "load"]
    assert [s.name for s in sources.lines] == ["kmsg"]
    assert sources.infos == [
        ("gpu", "GPU source off: --no-gpu"),
        ("containers", f"Docker source off: no socket at {tmp_path / 'none.sock'}"),
    ]
    no_choice = parse_args([*BASE, "--no-gpu", "--container-label", ""], {})
    assert build_sources(no_choice).infos[1] == (
        "containers",
        "Docker source off: no container label or name",
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Static:
    def __init__(self, name: str) -> None:
        self.name = name
        self.reads = 0

    def read(self) -> dict[str, int]:
        self.reads += 1
        return {"v": self.reads}


def _run_sampler(burst_active: bool, seconds: float) -> tuple[list[dict[str, Any]], Sampler]:
    clock = _Clock()
    burst = BurstController(clock=clock)
    if burst_active:
        burst.trigger("gpu fault: NVRM:")
    outbox = Outbox()
    stop = threading.Event()
    sources = [_Static("mem"), _Static("psi"), _Static("vmstat"), _Static("vllm")]

    def sleep(dt: float) -> None:
        clock.now += max(dt, 1e-6)
        if clock.now >= seconds - 0.05:  # between two burst ticks: no float edge
            stop.set()

    sampler = Sampler(sources, outbox, interval=1.0, burst=burst, mono=clock, sleep=sleep)
    sampler.run(stop)
    samples, _, _ = outbox.drain(1000, 10**9)
    return samples, sampler


def test_burst_marks_samples_and_raises_the_rate_of_mem_and_psi() -> None:
    quiet, _ = _run_sampler(False, 3.0)
    assert len(quiet) == 3 and not any(s["burst"] for s in quiet)
    assert all(set(s) >= {"mem", "psi", "vmstat", "vllm"} for s in quiet)
    bursty, sampler = _run_sampler(True, 3.0)
    assert len(bursty) == 30  # 10 Hz
    assert all(s["burst"] for s in bursty)
    full = [s for s in bursty if "vllm" in s]
    assert len(full) == 3  # other sources stay at 1 Hz
    assert all(set(s) == {"ts", "burst", "mem", "psi"} for s in bursty if "vllm" not in s)
    reads = {s.name: s.reads for s in sampler.sources}
    assert reads == {"mem": 30, "psi": 30, "vmstat": 3, "vllm": 3}


def _config(tmp_path: Path, collector: FakeCollector, **kw: Any) -> AgentConfig:
    argv = [
        "--collector", collector.url, "--token", TOKEN, "--host-name", "spark-test",
        "--interval", "0.2", "--proc-root", str(kw.pop("proc_root", FIXTURES / "proc")),
        "--kmsg", str(tmp_path / "kmsg"), "--state-dir", str(tmp_path / "state"),
        "--no-gpu", "--container-label", "", "--pstore-dir", str(tmp_path / "pstore"),
        *kw.pop("extra", []),
    ]  # fmt: skip
    (tmp_path / "kmsg").touch()
    return parse_args(argv, {})


def _run_agent(config: AgentConfig, **kw: Any) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    outbox = Outbox()
    thread = threading.Thread(
        target=cli.run,
        args=(config, stop),
        kwargs={"outbox": outbox, "shutting_down": lambda: False, **kw},
        daemon=True,
    )
    thread.start()
    stop.outbox = outbox  # type: ignore[attr-defined]
    return stop, thread


def _stop(stop: threading.Event, thread: threading.Thread) -> None:
    stop.set()
    stop.outbox.wake()  # type: ignore[attr-defined]
    thread.join(20)
    assert not thread.is_alive()


def test_canary_lines_appear_in_the_kmsg_file(tmp_path: Path, collector: FakeCollector) -> None:
    config = _config(tmp_path, collector, extra=["--canary-interval", "0.5"])
    stop, thread = _run_agent(config)
    wait_for(lambda: "freezewatch canary 2 " in (tmp_path / "kmsg").read_text())
    _stop(stop, thread)
    lines = (tmp_path / "kmsg").read_text().splitlines()
    assert lines[0].startswith("<") and " freezewatch canary 1 " in lines[0].replace(">", "> ")
    numbers = [int(ln.split()[2]) for ln in lines]
    # a clean restart continues the numbering exactly (n keeps rising within a boot)
    stop, thread = _run_agent(config)
    wait_for(lambda: len((tmp_path / "kmsg").read_text().splitlines()) > len(lines))
    _stop(stop, thread)
    again = [int(ln.split()[2]) for ln in (tmp_path / "kmsg").read_text().splitlines()]
    assert again[: len(numbers)] == numbers == list(range(1, len(numbers) + 1))
    assert again[len(numbers)] == numbers[-1] + 1


def test_burst_trigger_line_marks_shipped_samples(tmp_path: Path, collector: FakeCollector) -> None:
    config = _config(tmp_path, collector, extra=["--canary-interval", "0"])
    stop, thread = _run_agent(config)
    wait_for(lambda: collector.stream("samples"))
    with open(tmp_path / "kmsg", "ab") as f:
        f.write(b"3,1,1000,-;NVRM: Xid (PCI:000f:01:00): 31, pid=1, name=vllm\n")
    wait_for(lambda: sum(s["burst"] for s in collector.stream("samples")) >= 5)
    _stop(stop, thread)
    infos = [e["data"] for e in collector.events("source_info")]
    assert {"source": "burst", "info": "burst mode: gpu fault: NVRM:"} in infos
    assert {"source": "gpu", "info": "GPU source off: --no-gpu"} in infos
    bursty = [s for s in collector.stream("samples") if s["burst"]]
    assert any(set(s) == {"seq", "ts", "burst", "mem", "psi"} for s in bursty)


def test_netconsole_flag_sets_up_the_target_under_sys_root(
    tmp_path: Path, collector: FakeCollector
) -> None:
    proc = tmp_path / "proc"
    shutil.copytree(FIXTURES / "proc", proc)
    shutil.copytree(FIXTURES / "proc_netconsole" / "net", proc / "net")
    target = tmp_path / "sys/kernel/config/netconsole/freezewatch"
    target.mkdir(parents=True)  # as the kernel populates it after mkdir
    for attr in ("enabled", "extended", "remote_port", "remote_ip", "dev_name"):
        (target / attr).write_text("0\n")
    (target / "remote_mac").write_text("ff:ff:ff:ff:ff:ff\n")
    calls: list[dict[str, Any]] = []

    def setup(remote: str, **kw: Any) -> Any:
        from agent.netconsole import setup_target

        calls.append({"remote": remote, **kw})
        return setup_target(remote, **kw, run=lambda *a, **k: None, poke=lambda ip, port: None)

    extra = ["--canary-interval", "0", "--netconsole", "192.168.1.20:6666"]
    extra += ["--sys-root", str(tmp_path)]
    config = _config(tmp_path, collector, proc_root=proc, extra=extra)
    stop, thread = _run_agent(config, netconsole_setup=setup)
    wait_for(
        lambda: [e for e in collector.stream("events") if e["data"].get("source") == "netconsole"]
    )
    _stop(stop, thread)
    assert calls[0]["remote"] == "192.168.1.20:6666"
    assert calls[0]["sys_root"] == str(tmp_path)
    assert (target / "remote_ip").read_text() == "192.168.1.20"
    assert (target / "enabled").read_text() == "1"
    (event,) = [e for e in collector.stream("events") if e["data"].get("source") == "netconsole"]
    assert event["kind"] == "source_info" and ": ok" in event["data"]["info"]


def test_netconsole_remove_is_a_one_shot_action(tmp_path: Path) -> None:
    target = tmp_path / "sys/kernel/config/netconsole/freezewatch"
    target.mkdir(parents=True)
    (target / "enabled").write_text("1")
    config = parse_args(["--netconsole-remove", "--sys-root", str(tmp_path)], {})
    # disabled first; a plain directory (unlike configfs) refuses rmdir while files remain
    assert cli.remove_netconsole(config) == 1
    assert (target / "enabled").read_text() == "0"
