"""A run's lease in the database (SQLite and PostgreSQL): one collector drives a run at a time,
a run whose collector died is taken over once its lease expires, never before; the groups it
left are handed to the next one; the power hook runs here, in its own process group."""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

from collector import db
from collector.matrix import durable, store
from collector.matrix.power import run_hook
from collector.matrix.presets import get_preset
from collector.models import Host, MatrixStep
from collector.timeutil import utcnow
from tests.collector.conftest import Collector

LEASE_S = 30.0


def queue(c: Collector, runs: int = 2) -> tuple[int, list[int]]:
    c.add_host("spark-01")
    with db.session_scope(c.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        host = session.query(Host).one()
        spec = get_preset("nemoclaw-spark-qwen", "spark-01")
        return host.id, [store.create_run(session, spec=spec).id for _ in range(runs)]


def claim(c: Collector, host_id: int, owner: str, after_s: float = 0) -> tuple[int, bool] | None:
    now = utcnow() + timedelta(seconds=after_s)
    with db.session_scope(c.client.app.state.sessionmaker) as session:  # type: ignore[attr-defined]
        return durable.claim_next(session, host_id=host_id, owner=owner, now=now, lease_s=LEASE_S)


def test_one_collector_drives_a_hosts_runs_and_a_dead_ones_run_is_taken_over(
    collector: Collector,
) -> None:
    host_id, (first, _second) = queue(collector)
    assert claim(collector, host_id, "a") == (first, False)
    # Another collector: the host's run is leased, so neither it nor the next queued one.
    assert claim(collector, host_id, "b") is None
    assert claim(collector, host_id, "b", after_s=LEASE_S - 1) is None
    # "a" died (no renewal): once the lease expired "b" takes the running run over first.
    assert claim(collector, host_id, "b", after_s=LEASE_S + 1) == (first, True)
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        now = utcnow()
        assert not durable.renew_lease(session, run_id=first, owner="a", now=now, lease_s=LEASE_S)
        assert durable.renew_lease(session, run_id=first, owner="b", now=now, lease_s=LEASE_S)
        assert durable.hosts_with_work(session, now=now) == [host_id]  # the queued second run
        durable.release_lease(session, run_id=first, owner="b")  # SIGTERM: let go at once
        assert durable.hosts_with_work(session, now=now) == [host_id]
    assert claim(collector, host_id, "c") == (first, True)


def test_groups_and_open_steps_are_handed_over(collector: Collector) -> None:
    _host_id, (run_id, _) = queue(collector)
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        durable.add_group(session, run_id=run_id, pgid=4242, boot_id="boot-a", step_id=None)
        durable.add_group(session, run_id=run_id, pgid=4343, boot_id="boot-a", step_id=None)
        durable.drop_group(session, run_id=run_id, pgid=4343)
        session.add(
            MatrixStep(run_id=run_id, profile="A", repetition=1, kind="workload", name="w",
                       started_at=1.0, detail={})
        )  # fmt: skip
    with db.session_scope(factory) as session:
        (open_step,) = durable.interrupt_open_steps(session, run_id=run_id, now=9.0)
        assert (open_step.outcome, open_step.ended_at) == ("interrupted", 9.0)
        groups = durable.take_groups(session, run_id=run_id)
        assert groups == [{"pgid": 4242, "boot_id": "boot-a", "step_id": None}]
    with db.session_scope(factory) as session:
        assert durable.take_groups(session, run_id=run_id) == []
        assert durable.interrupt_open_steps(session, run_id=run_id, now=10.0) == []


def test_the_power_hook_runs_with_its_argv_and_is_killed_on_timeout(tmp_path: Path) -> None:
    out = run_hook([sys.executable, "-c", "import sys; print(sys.argv[1:])", "a b", "c"], 30)
    assert (out["exit_status"], out["timed_out"], out["output_tail"]) == (
        0,
        False,
        "['a b', 'c']\n",
    )
    # The hook and a child of its own: both die at the timeout (one process group).
    pidfile = tmp_path / "child.pid"
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pidfile)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    slow = run_hook([sys.executable, str(hook)], 2.0)
    assert (slow["exit_status"], slow["timed_out"]) == (None, True)
    assert not alive(int(pidfile.read_text()))
    missing = run_hook([str(tmp_path / "no-such-hook")], 5)
    assert missing["exit_status"] is None and "No such file" in missing["output_tail"]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is dead)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def test_planned_steps_count_the_reboots() -> None:
    spec = get_preset("nemoclaw-spark-isolation", "spark-01")
    # Per unit: reboot, remove previous server, start, health, soak, stop.
    assert store.planned_steps(spec) == 6 * 3 * 5
