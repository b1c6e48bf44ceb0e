"""The guard's decisions on samples read from a synthetic /proc tree and on kernel records:
each rule trips on the sample that completes it and not one sample earlier; outside its
phases, in dry-run and inside the cooldown it does nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.guard.actions import ActionContext
from agent.guard.engine import ActionRunner
from agent.outbox import Outbox
from agent.sampler import Sampler
from tests.support.docker_standin import DockerStandin
from tests.support.proctree import GIB, ProcTree

from .conftest import Clock, Events, make_guard

MEM = '{"rules": [{"mem_available_below": "4GiB for 2s"}], "actions": ["docker_stop"]}'


class Recorder:
    """An ActionRunner's submit, recorded (the engine's side of the hand-off)."""

    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []

    def submit(self, firing: dict[str, Any], config: Any) -> None:
        self.submitted.append(firing)


def feed(guard: Any, proc: ProcTree, clock: Clock, until: float, step: float) -> float | None:
    """Sample every ``step`` s until ``until`` (relative); the time of the first firing."""
    start = clock.t
    n = 0
    while clock.t <= start + until + 1e-9:
        before = len(guard._on_event.of("guard_fired"))
        guard.observe_sample(proc.sample(clock.t))
        if len(guard._on_event.of("guard_fired")) > before:
            return round(clock.t - start, 3)
        n += 1
        clock.t = start + n * step
    return None


@pytest.mark.parametrize("step", [1.0, 0.1])  # the 1 s tick and the 10 Hz burst
def test_mem_available_trips_on_the_sample_that_completes_two_seconds(
    proc: ProcTree, step: float
) -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(MEM, events=events, clock=clock, runner=runner)
    proc.set(available=5 * GIB)
    assert feed(guard, proc, clock, until=5, step=step) is None  # above the line: nothing
    proc.set(available=3.5 * GIB)
    # first low sample at 0; held 2 s on the sample at 2.0, not on the one before it
    assert feed(guard, proc, clock, until=10, step=step) == 2.0
    fired = events.of("guard_fired")[0]
    assert fired["rule"] == "mem_available_below: 4GiB for 2s"
    assert fired["values"]["mem_available"] == 3.5 * GIB
    assert fired["values"]["held_s"] == 2.0 and fired["dry_run"] is False
    assert runner.submitted == [fired]


def test_a_sample_above_the_line_restarts_the_hold(proc: ProcTree) -> None:
    events, clock = Events(), Clock()
    guard = make_guard(MEM, events=events, clock=clock, runner=Recorder())
    proc.set(available=3 * GIB)
    assert feed(guard, proc, clock, until=1.5, step=0.5) is None
    proc.set(available=4.5 * GIB)
    assert feed(guard, proc, clock, until=0, step=0.5) is None
    proc.set(available=3 * GIB)
    assert feed(guard, proc, clock, until=10, step=0.5) == 2.0  # counted from the new streak


def test_psi_full_avg10_held_three_seconds(proc: ProcTree) -> None:
    rules = '{"rules": [{"psi_memory_full_avg10_above": "20 for 3s"}], "actions": ["docker_stop"]}'
    events, clock = Events(), Clock()
    guard = make_guard(rules, events=events, clock=clock, runner=Recorder())
    proc.set(psi_full=20.0)  # "above": 20 itself is not above 20
    assert feed(guard, proc, clock, until=6, step=0.1) is None
    proc.set(psi_full=35.6)
    assert feed(guard, proc, clock, until=10, step=0.1) == 3.0
    assert events.of("guard_fired")[0]["values"]["psi_memory_full_avg10"] == 35.6


def test_swap_growth_within_the_window(proc: ProcTree) -> None:
    rules = '{"rules": [{"swap_used_growth_above": "1GiB/10s"}], "actions": ["docker_stop"]}'
    events, clock = Events(), Clock()
    guard = make_guard(rules, events=events, clock=clock, runner=Recorder())
    for i in range(25):  # 1 GiB over 20 s: never more than 1 GiB within 10 s
        proc.set(swap_used=i * GIB / 20)
        guard.observe_sample(proc.sample(clock.t))
        clock.t += 1
    assert events.of("guard_fired") == []
    base = 24 * GIB / 20  # where the slow growth ended; flat for a window
    for _ in range(11):
        guard.observe_sample(proc.sample(clock.t))
        clock.t += 1
    for i in range(10):  # 0.2 GiB a second: 1.0 GiB after 5 s (not above), 1.2 after 6
        proc.set(swap_used=base + i * 0.2 * GIB)
        guard.observe_sample(proc.sample(clock.t))
        if events.of("guard_fired"):
            break
        clock.t += 1
    assert i == 6
    values = events.of("guard_fired")[0]["values"]
    assert values["growth"] == pytest.approx(1.2 * GIB, rel=1e-4) and values["over_s"] == 6


def kmsg(text: str, ts: float, kseq: int = 1) -> dict[str, Any]:
    return {"ts": ts, "source": "kmsg", "priority": 3, "kseq": kseq, "text": text}


NO_MEMORY = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)
KERNEL = """
rules:
  - kernel_event: [nv_err NV_ERR_NO_MEMORY, xid fatal]
actions: [docker_stop]
cooldown: 0s
"""


@pytest.mark.parametrize(
    ("text", "trips"),
    [
        (NO_MEMORY, True),
        (
            NO_MEMORY.replace("Out of memory [NV_ERR_NO_MEMORY]", "Bad [NV_ERR_INVALID_STATE]"),
            False,
        ),
        ("NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus.", True),
        ("NVRM: Xid (PCI:000f:01:00): 119, pid=3849, name=KMS thread, Timeout after 45s", True),
        ("NVRM: Xid (PCI:000f:01:00): 13, Graphics SM Warp Exception", False),  # RESTART_APP
        ("NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05", False),
    ],
)
def test_kernel_records_trip_at_once(text: str, trips: bool) -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(KERNEL, events=events, clock=clock, runner=runner)
    guard.observe_line(kmsg(text, ts=clock.t + 0.5))
    assert len(runner.submitted) == int(trips)
    if trips:
        assert runner.submitted[0]["values"]["text"] == text


def test_nvml_xid_report_trips_like_the_kernel_line() -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(KERNEL, events=events, clock=clock, runner=runner)
    line = {"ts": clock.t + 1, "source": "journal", "priority": 3, "text": "NVML: Xid 79 on GPU 0",
            "fields": {"xid": 79, "gpu": 0, "pci": None, "origin": "nvml"}}  # fmt: skip
    guard.observe_line(line)
    assert [f["values"]["detail"] for f in runner.submitted] == [79]


def test_kernel_backlog_read_at_start_never_trips() -> None:
    """/dev/kmsg is read from its start: an Xid from an hour ago is history, not a trip."""
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(KERNEL, events=events, clock=clock, runner=runner)
    guard.observe_line(kmsg(NO_MEMORY, ts=clock.t - 3600))
    guard.observe_line(kmsg(NO_MEMORY, ts=clock.t - 0.001))
    assert runner.submitted == [] and events.items == []


def vllm(text: str, ts: float = 0.0) -> dict[str, Any]:
    return {"ts": ts, "source": "vllm", "priority": 6, "text": text}


PHASED = """
phases: [loading_weights, loading_drafter, profiling]
rules: [{mem_available_below: 4GiB for 1s}]
actions: [docker_stop]
"""


def test_phases_restrict_the_rules(proc: ProcTree) -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(PHASED, events=events, clock=clock, runner=runner)
    proc.set(available=2 * GIB)
    assert feed(guard, proc, clock, until=3, step=0.5) is None  # phase unknown: no rule counts
    guard.observe_line(
        vllm("(APIServer pid=1) INFO 05-14 08:20:40 [utils.py:233] non-default args: {}")
    )
    assert guard.phases.phase == "starting"
    assert feed(guard, proc, clock, until=3, step=0.5) is None  # outside the phases
    guard.observe_line(
        vllm(
            "(APIServer pid=1) INFO 05-14 08:26:10 [api_server.py:1900] Starting vLLM server on http://0.0.0.0:8000"
        )
    )
    assert guard.phases.phase == "serving"
    assert feed(guard, proc, clock, until=3, step=0.5) is None  # outside the phases
    guard.observe_line(
        vllm(
            "(EngineCore pid=168) INFO 05-14 08:20:59 [gpu_model_runner.py:4700] "
            "Starting to load model x..."
        )
    )
    assert guard.phases.phase == "loading_weights"
    assert feed(guard, proc, clock, until=3, step=0.5) == 1.0
    assert runner.submitted[0]["phase"] == "loading_weights"


def test_leaving_the_phases_breaks_the_hold(proc: ProcTree) -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(PHASED, events=events, clock=clock, runner=runner)
    proc.set(available=2 * GIB)
    guard.observe_line(
        vllm("INFO 05-14 08:20:59 [gpu_model_runner.py:4700] Starting to load model x")
    )
    assert feed(guard, proc, clock, until=0.5, step=0.5) is None
    guard.observe_line(vllm("INFO:     Application startup complete."))
    assert feed(guard, proc, clock, until=2, step=0.5) is None
    guard.observe_line(
        vllm("INFO 05-14 08:30:00 [gpu_model_runner.py:4700] Starting to load model y")
    )
    assert feed(guard, proc, clock, until=3, step=0.5) == 1.0  # a fresh hold, not the old one


def test_health_200_means_serving_until_the_log_says_otherwise(proc: ProcTree) -> None:
    rules = "rules: [{mem_available_below: 4GiB, phases: [serving]}]\nactions: [docker_stop]"
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(rules, events=events, clock=clock, runner=runner)
    proc.set(available=2 * GIB)
    guard.observe_sample({**proc.sample(clock.t), "vllm": [{"url": "u", "health": None}]})
    assert runner.submitted == []
    guard.observe_sample({**proc.sample(clock.t), "vllm": [{"url": "u", "health": 200}]})
    assert [f["phase"] for f in runner.submitted] == ["serving"]


def test_dry_run_reports_every_match_and_never_acts(
    proc: ProcTree, standin: DockerStandin, tmp_path: Path
) -> None:
    events, clock = Events(), Clock()
    runner = ActionRunner(ActionContext(docker_socket=standin.socket_path,
                                        container_label="com.nvidia.nemoclaw.managed-vllm=true"),
                          events, tmp_path / "guard.json")  # fmt: skip
    text = MEM.replace('"actions"', '"cooldown": "10s", "actions"')
    guard = make_guard(text, events=events, clock=clock, runner=runner, dry_run=True,
                       state_path=tmp_path / "guard.json")  # fmt: skip
    proc.set(available=1 * GIB)
    assert feed(guard, proc, clock, until=30, step=0.1) == 2.0
    feed(guard, proc, clock, until=30, step=0.1)  # after the cooldown, a second match
    fired = events.of("guard_fired")
    assert len(fired) == 2 and all(f["dry_run"] for f in fired)
    assert fired[0]["actions"] == ["docker_stop timeout=10.0 kill_after=5.0"]
    assert standin.calls == [] and events.of("guard_result") == []
    assert not (tmp_path / "guard.json").exists()  # a dry-run match holds no cooldown over


def test_cooldown_holds_and_survives_a_restart(proc: ProcTree, tmp_path: Path) -> None:
    events, clock, runner = Events(), Clock(), Recorder()
    text = MEM.replace('"actions"', '"cooldown": "5m", "actions"')
    state = tmp_path / "guard.json"
    guard = make_guard(text, events=events, clock=clock, runner=runner, state_path=state)
    proc.set(available=1 * GIB)
    assert feed(guard, proc, clock, until=5, step=0.1) == 2.0
    assert feed(guard, proc, clock, until=290, step=1.0) is None  # inside the cooldown
    assert len(runner.submitted) == 1 and guard.suppressed > 0
    assert feed(guard, proc, clock, until=20, step=1.0) is not None  # 5 min after the first
    assert len(runner.submitted) == 2
    # What ActionRunner writes after a firing's actions ran: a restarted agent reads it.
    state.write_text(f'{{"fired_at": {clock.t}, "rule": "x"}}')
    clock.t += 60
    restarted = make_guard(text, events=Events(), clock=clock, runner=(again := Recorder()),
                           state_path=state)  # fmt: skip
    assert feed(restarted, proc, clock, until=200, step=1.0) is None  # 60 + 200 s < 5 min
    assert feed(restarted, proc, clock, until=60, step=1.0) is not None
    assert len(again.submitted) == 1


def test_the_sampler_feeds_the_guard_every_sample(proc: ProcTree) -> None:
    """Full ticks and the burst's fast (mem + psi) samples both reach the guard."""
    events, clock, runner = Events(), Clock(), Recorder()
    guard = make_guard(MEM.replace("for 2s", "for 0s"), events=events, clock=clock, runner=runner)
    outbox = Outbox()
    sampler = Sampler(proc.sources, outbox, wall=clock, mono=clock, observer=guard.observe_sample)
    proc.set(available=5 * GIB)
    sampler.sample_once()
    sampler.sample_once(fast_only=True)
    assert runner.submitted == []
    proc.set(available=3 * GIB)
    sampler.sample_once(fast_only=True)
    assert len(runner.submitted) == 1
    assert len(outbox.drain(100, 1 << 20)[0]) == 3


def test_a_failing_guard_does_not_stop_sampling(proc: ProcTree) -> None:
    def broken(sample: dict[str, Any]) -> None:
        raise RuntimeError("guard bug")

    outbox = Outbox()
    sampler = Sampler(proc.sources, outbox, observer=broken)
    proc.set()
    assert sampler.sample_once() is not None and sampler.sample_once() is not None
    samples, _, events = outbox.drain(100, 1 << 20)
    assert len(samples) == 2
    assert [e["data"]["source"] for e in events] == ["observer"]  # reported once
