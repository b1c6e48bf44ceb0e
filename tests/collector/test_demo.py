"""`collector demo` helpers: kept tokens, simulated registration, argv placeholders, port check."""

from __future__ import annotations

import socket
from pathlib import Path

from collector import db
from collector.auth import host_for_token
from collector.demo import campaign_plan, expand, freeze_plan, port_free, register_hosts
from collector.hosts import registry as hosts


def test_tokens_are_kept_across_runs_and_replaced_when_stale(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    db.migrate(url)
    first = register_hosts(url, tmp_path, {"box": False, "spark-sim": True})
    assert (tmp_path / "agent-token").read_text().strip() == first["box"]
    assert (tmp_path / "sim-token-spark-sim").read_text().strip() == first["spark-sim"]
    assert register_hosts(url, tmp_path, {"box": False, "spark-sim": True}) == first

    (tmp_path / "sim-token-spark-sim").write_text("fwh_not-a-token-of-this-db\n")
    third = register_hosts(url, tmp_path, {"box": False, "spark-sim": True})
    assert third["box"] == first["box"] and third["spark-sim"] != first["spark-sim"]
    engine = db.make_engine(url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        sim = host_for_token(session, token=third["spark-sim"])
        assert sim is not None and sim.name == "spark-sim" and sim.simulated is True
        assert hosts.get_host(session, name="box").simulated is False
    engine.dispose()


def test_expand_fills_known_placeholders_only() -> None:
    argv = ["{python}", "--collector", "{url}", "--token", "{token:sim}", "{data}/x", "{other}"]
    values = {"url": "http://127.0.0.1:9", "data": "/d", "python": "/py", "port": "9"}
    assert expand(argv, values, {"sim": "fwh_1"}) == [
        "/py",
        "--collector",
        "http://127.0.0.1:9",
        "--token",
        "fwh_1",
        "/d/x",
        "{other}",
    ]


def test_port_free_sees_a_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        assert port_free(port) is False
    assert port_free(port) is True


def test_freeze_plan_says_when_the_simulated_host_freezes() -> None:
    sim = ["/py", "-m", "tests.support.simhost", "--host-name", "spark-sim", "--freeze-every"]
    plan = freeze_plan([*sim, "180"])
    assert plan is not None
    assert plan.startswith("  spark-sim: first freeze")
    assert "after ~45 s, then every ~3 min of uptime" in plan and "away 20 s" in plan
    assert "after ~10 s, once" in (freeze_plan([*sim, "0", "--first-freeze", "10"]) or "")
    assert "never freezes" in (freeze_plan([*sim, "0"]) or "")
    assert freeze_plan(["/bin/true"]) is None


def test_campaign_plan_says_what_the_lab_host_runs_and_when() -> None:
    lab = ["/py", "-m", "tests.support.simlab_demo", "--host-name", "spark-lab"]
    plan = campaign_plan(lab, "http://127.0.0.1:8080")
    assert plan is not None and plan.startswith("  spark-lab: a matrix campaign")
    # as the demo runs on a 2-core machine: a reboot at once, then ~40 s a unit
    assert "from the start (its first vLLM start ~15 s in)" in plan
    assert "freezes once during the second unit (~1 min in)" in plan
    assert "it ends after ~3 min" in plan
    assert plan.endswith("k-of-N verdicts on http://127.0.0.1:8080/matrix\n")
    assert campaign_plan(["/py", "-m", "tests.support.simhost"], "http://x") is None
