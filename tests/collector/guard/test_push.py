"""``freezewatch-collector guard push`` against a real sshd: checked first, written atomically."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from agent.guard.rules import parse_config
from agent.guard.rulesfile import load_rules_file
from collector import db
from collector.cli import build_parser
from collector.guard.cli import env_note, run_guard_cli
from collector.guard.push import push_rules
from collector.guard.report import GuardOut
from collector.hosts import registry
from collector.remote.ssh import SSHClient
from tests.support.sshd import TestSshd

pytestmark = pytest.mark.sshd

RULES = """\
# pushed from the collector
cooldown: 2m
rules:
  - mem_available_below: 4GiB for 2s
  - kernel_event: [nv_err NV_ERR_NO_MEMORY, xid fatal]
actions:
  - docker_stop: {timeout: 10s}
"""


def register(url: str, server: TestSshd) -> None:
    db.migrate(url)
    engine = db.make_engine(url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        host, _token = registry.create_host(session, name="spark-01")
        host.ssh_user, host.ssh_host, host.ssh_port = server.user, server.host, server.port
        host.ssh_key_path, host.ssh_host_key = str(server.key_path), server.host_key_line
    engine.dispose()


def cli(url: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["--db", url, "guard", *argv])
    return run_guard_cli(args, out=out, err=err), out.getvalue(), err.getvalue()


def test_push_writes_what_the_agent_reads(sshd: TestSshd, sqlite_url: str, tmp_path: Path) -> None:
    register(sqlite_url, sshd)
    rules = tmp_path / "guard.yaml"
    rules.write_text(RULES)
    target = tmp_path / "host/etc/freezewatch/guard.json"
    code, out, err = cli(sqlite_url, "push", "spark-01", str(rules), "--path", str(target),
                         "--no-restart")  # fmt: skip
    assert (code, err) == (0, "")
    assert "write: ok" in out
    note = "note: the host's agent has not reported its guard yet; it reads"
    assert f"{note} {target} only with FREEZEWATCH_AGENT_GUARD={target} in its env" in out
    assert (
        stat.S_IMODE(target.stat().st_mode) == 0o600
        and not target.with_suffix(".json.tmp").exists()
    )
    pushed = parse_config(load_rules_file(target))
    assert pushed.cooldown_s == 120 and [r.kind for r in pushed.rules] == [
        "mem_available_below",
        "kernel_event",
    ]
    assert json.loads(target.read_text())["actions"] == [{"docker_stop": {"timeout": "10s"}}]
    code, out, _err = cli(sqlite_url, "show", "spark-01")
    assert code == 0 and json.loads(out) == {"state": None, "reported_at": None}


def test_wrong_rules_are_refused_before_anything_is_written(
    sqlite_url: str, tmp_path: Path
) -> None:
    rules = tmp_path / "guard.yaml"
    rules.write_text("rules:\n  - mem_available_below: 4GiB\n")  # no actions, not a dry run
    code, _out, err = cli(sqlite_url, "push", "spark-01", str(rules), "--path", str(tmp_path / "x"))
    assert code == 2 and "no actions" in err and not (tmp_path / "x").exists()


def test_the_agent_is_restarted_after_the_write(sshd: TestSshd, tmp_path: Path) -> None:
    marker, target = tmp_path / "restarted", tmp_path / "guard.json"
    steps = push_rules(
        SSHClient(),
        sshd.target(),
        document={"rules": [{"mem_available_below": "4GiB"}], "actions": ["docker_stop"]},
        path=str(target),
        restart_argv=("sh", "-c", f"test -s {target} && echo yes > {marker}"),
    )
    assert [(s["step"], s["ok"]) for s in steps] == [("write", True), ("restart", True)]
    assert marker.read_text() == "yes\n"  # the file was complete when the agent restarted
    failed = push_rules(SSHClient(), sshd.target(), document={}, path="/proc/nope/guard.json",
                        restart_argv=("sh", "-c", f"echo no > {marker}"))  # fmt: skip
    assert [s["step"] for s in failed] == ["write"] and not failed[0]["ok"]
    assert marker.read_text() == "yes\n"


def test_the_note_says_what_the_agent_reported() -> None:
    path = "/etc/freezewatch/guard.json"
    reads = f"; it reads {path} only with FREEZEWATCH_AGENT_GUARD={path} in its env"
    never = GuardOut(state=None, reported_at=None)
    off = GuardOut(state="off", reported_at=1.0)
    other = GuardOut(state="armed", reported_at=1.0, source="/etc/freezewatch/guard.yaml")
    assert env_note(never, path) == "note: the host's agent has not reported its guard yet" + reads
    assert env_note(off, path) == "note: the host's agent reported no rules file" + reads
    assert env_note(other, path) == (
        "note: the host's agent reads its rules from /etc/freezewatch/guard.yaml" + reads
    )
    assert env_note(GuardOut(state="armed", reported_at=1.0, source=path), path) is None
