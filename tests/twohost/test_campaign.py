"""Matrix campaigns end to end: a real collector process, the simulated host over a real sshd
(in a network namespace where possible), the vLLM stand-in started over SSH.

The host reboots when the collector asks (a planned silence: no alert), freezes (SIGSTOP of
every process of the host, and its link down in a namespace) and comes back, or does not;
the collector is killed in the middle of a step and started again.
"""

from __future__ import annotations

import itertools
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.twohost.campaign_world import HOST, World, campaign_world, wait_for

pytestmark = [pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(300)]
UNIT = ["start", "health", "workload", "stop"]


def units(run: dict[str, Any]) -> list[tuple[str, int, str, str]]:
    return [(s["profile"], s["repetition"], s["kind"], s["outcome"]) for s in run["steps"]]


def ok_unit(profile: str, kinds: list[str] = UNIT, rep: int = 1) -> list[tuple[str, int, str, str]]:
    return [(profile, rep, kind, "ok") for kind in kinds]


def unreachable(w: World) -> dict[str, Any]:
    found = wait_for(lambda: [i for i in w.incidents() if i["kind"] == "unreachable"], "incident")
    assert len(found) == 1, found
    return found[0]  # type: ignore[no-any-return]


def test_cold_boot_campaign_two_profiles_two_repetitions(tmp_path: Path) -> None:
    with campaign_world(tmp_path) as w:
        first_boot = w.lab.boot_id
        run_id = w.submit(w.spec(repeat=2, reboot=True))
        run = w.finished(run_id)
        assert run["status"] == "succeeded", w.failure(run)
        assert w.leftover() == ""
        assert units(run) == [
            step for r in (1, 2) for p in "XY" for step in ok_unit(p, ["reboot", *UNIT], r)
        ]
        # Each start followed a reboot of its own: the agent's boot ids chain, one per unit.
        reboots = [s["detail"] for s in run["steps"] if s["kind"] == "reboot"]
        assert reboots[0]["from_boot_id"] == first_boot
        chain = [r["from_boot_id"] for r in reboots] + [reboots[-1]["to_boot_id"]]
        assert len(set(chain)) == 5
        assert all(a["to_boot_id"] == b["from_boot_id"] for a, b in itertools.pairwise(reboots))
        assert all(r["boot_s"] > 0 for r in reboots)
        assert w.lab.boot_id == chain[-1]

        # Planned: on the freezes page, resolved planned_reboot, and never alerted.
        planned = [i for i in w.incidents() if i["kind"] == "planned"]
        assert len(planned) == 4
        assert {i["resolution"] for i in planned} == {"planned_reboot"}
        assert all(i["id"] in r["incidents"] for i, r in zip(planned[::-1], reboots, strict=True))
        assert w.alerts() == []

        report = w.api(f"/api/v1/matrix-runs/{run_id}/report.json")
        summary = {row["profile"]: row for row in report["summary"]["profiles"]}
        assert set(summary) == {"X", "Y"}
        assert (summary["X"]["n"], summary["Y"]["n"]) == (2, 2)
        assert summary["X"]["kernel_events"]["nv_err"] == {"k": 2, "n": 2}
        assert summary["Y"]["kernel_events"]["nv_err"] == {"k": 0, "n": 2}
        assert summary["X"]["freezes"] == {"k": 0, "n": 2, "incidents": []}
        (versus,) = report["summary"]["comparisons"]
        assert versus["rates"]["nv_err"]["words"].startswith("0 of 2 vs 2 of 2: p = 0.33")
        md = w.api(f"/api/v1/matrix-runs/{run_id}/report.md")
        assert "### Across repetitions" in md
        assert "| X | 2 | 0/2 | 2/2 |" in md and "| Y | 2 | 0/2 | 0/2 |" in md


def test_a_freeze_mid_workload_ends_the_step_and_the_campaign_goes_on(tmp_path: Path) -> None:
    with campaign_world(tmp_path) as w:
        run_id = w.submit(w.spec(soak_s=4))
        w.soaking(run_id, "X")
        w.lab.freeze()
        froze = wait_for(lambda: w.step(run_id, "X", "workload", outcome="host_froze"), "froze")
        incident = unreachable(w)
        assert froze["detail"]["incident"]["id"] == incident["id"]
        assert froze["detail"]["incident"]["kind"] == "unreachable"
        w.lab.crash_and_boot()  # the frozen host is reset by hand
        run = w.finished(run_id)
        assert run["status"] == "succeeded", w.failure(run)
        assert units(run) == [
            *ok_unit("X", ["start", "health"]),
            ("X", 1, "workload", "host_froze"),
            *ok_unit("X", ["recover", "stop"]),
            *ok_unit("Y"),
        ]
        assert w.leftover() == ""
        # The request in flight was cut by the freeze, not failed by vLLM.
        records = w.requests(run_id)
        cut = [r for r in records if r["cut_by_freeze"]]
        assert [(r["profile"], r["error"]) for r in cut] == [("X", None)]
        assert not any(r["error"] for r in records)
        # A real freeze alerts (opened, then resolved as a reboot), unlike planned reboots.
        wait_for(lambda: len(w.alerts()) >= 2, "alerts")
        assert w.alerts() == ["incident.opened", "incident.resolved"]
        detail = w.api(f"/api/v1/incidents/{incident['id']}")
        assert detail["resolution"] == "rebooted"
        assert detail["snapshot"]["context"]["matrix_run"]["profile"] == "X"
        report = w.api(f"/api/v1/matrix-runs/{run_id}/report.json")
        x, y = report["profiles"]
        assert x["verdict"] == "FAIL"
        assert x["reasons"] == [
            f"host froze during workload soak (incident {incident['id']}, unreachable, rebooted)",
            "kernel events during startup: nv_err x1",
        ]
        assert (y["verdict"], y["reasons"]) == ("PASS", [])
        rows = {r["profile"]: r for r in report["summary"]["profiles"]}
        assert rows["X"]["freezes"] == {"k": 1, "n": 1, "incidents": [incident["id"]]}
        assert rows["Y"]["freezes"]["k"] == 0


def power_hook(log: Path, *, brings_back: bool) -> Any:
    def extra(lab: Any) -> list[str]:
        argv = lab.power_argv(log, brings_back=brings_back)
        return ["--power-cycle", json.dumps(argv), "--power-after", "3"]

    return extra


def test_a_host_that_stays_away_is_power_cycled_once(tmp_path: Path) -> None:
    log = tmp_path / "power.log"
    with campaign_world(tmp_path, cli_extra=power_hook(log, brings_back=True)) as w:
        argv = w.lab.power_argv(log, brings_back=True)
        run_id = w.submit(w.spec(soak_s=4))
        w.soaking(run_id, "X")
        w.lab.freeze()  # and it never comes back by itself
        run = w.finished(run_id)
        assert run["status"] == "succeeded", w.failure(run)
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert calls == [["-c", *argv[3:]]]
        incident = unreachable(w)
        (used,) = [e for e in run["events"] if e["kind"] == "power_cycle"]
        assert (used["argv"], used["incident_id"], used["exit_status"]) == (argv, incident["id"], 0)
        detail = w.api(f"/api/v1/incidents/{incident['id']}")
        assert [p["argv"] for p in detail["power_cycles"]] == [argv]
        assert detail["power_cycles"][0]["run_id"] == run_id
        assert w.step(run_id, "Y", "workload", outcome="ok") is not None


def test_a_host_that_never_comes_back_fails_the_run_saying_so(tmp_path: Path) -> None:
    log = tmp_path / "power.log"
    with campaign_world(tmp_path, cli_extra=power_hook(log, brings_back=False)) as w:
        run_id = w.submit(w.spec(soak_s=4, freeze_wait_s=10))
        w.soaking(run_id, "X")
        w.lab.freeze()
        run = w.finished(run_id)
        incident = unreachable(w)
        assert run["status"] == "failed"
        reason = (
            f"host {HOST} did not come back within 10 s after it froze (incident "
            f"{incident['id']}, unreachable); power-cycled once after"
        )
        assert run["error"].startswith(reason), run["error"]
        assert len(log.read_text().splitlines()) == 1  # once, though the host stayed away
        assert units(run)[-1] == ("X", 1, "recover", "timeout")
        assert w.api(f"/api/v1/matrix-runs/{run_id}/report.json")["error"] == run["error"]
        md = w.api(f"/api/v1/matrix-runs/{run_id}/report.md").splitlines()
        assert md[2].startswith(f"**Failed:** {reason}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_collector_restart_mid_step_resumes_the_campaign(tmp_path: Path, sig: int) -> None:
    # A grace above the agent's longest retry delay (5 s): its first batch to the restarted
    # collector may wait that long, and this test is about the run, not that silence.
    with campaign_world(tmp_path, env={"FREEZEWATCH_GRACE_S": "6"}) as w:
        run_id = w.submit(w.spec(soak_s=6))
        w.soaking(run_id, "X")
        w.stop_collector(sig)
        if sig == signal.SIGKILL:
            assert w.leftover() != ""  # X's server outlived its collector, for now
        else:
            assert w.leftover() == ""  # a stopping collector kills what it started
        w.start_collector()
        run = w.finished(run_id)
        assert run["status"] == "succeeded", w.failure(run)
        assert w.leftover() == ""
        assert units(run) == [
            *ok_unit("X", ["start", "health"]),
            ("X", 1, "workload", "interrupted"),
            ("X", 1, "stop", "ok"),
            *ok_unit("Y"),
        ]
        names = [(s["profile"], s["repetition"], s["kind"], s["name"]) for s in run["steps"]]
        assert len(names) == len(set(names))
        (resumed,) = [e for e in run["events"] if e["kind"] == "resumed"]
        if sig == signal.SIGKILL:
            assert [s["step"] for s in resumed["interrupted_steps"]] == ["workload: soak"]
            stop = w.step(run_id, "X", "stop")
            assert stop is not None
            assert [g["action"] for g in stop["detail"]["left_groups"]] == ["killed"]
        assert w.alerts() == []  # the collector's own restart raises no false alarm
