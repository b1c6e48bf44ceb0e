"""deploy-agent against the real sshd fixture and a live collector.

The test sshd logs in as root on this machine, so the install goes under a scratch ``--root``
(this machine's /etc and /opt are not the test's to change). Where this machine runs no
systemd the deploy must say so and list the commands a start would run; the test then starts
the installed zipapp itself, with the env file the unit would load, and the deploy's heartbeat
step reports the agent's version and sources.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

import agent
from collector import db
from collector.auth import token_matches
from collector.cli import build_parser
from collector.deploy import layout
from collector.deploy.cli import run_deploy_cli
from collector.deploy.heartbeat import wait_for_heartbeat
from collector.models import Host
from tests.support.sshd import TestSshd
from tests.twohost.harness import ADMIN, Running, running_collector

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
NAME = "spark-deploy"
SYSTEMD = Path("/run/systemd/system").is_dir()
START = [
    "systemctl daemon-reload",
    "systemctl enable freezewatch-agent.service",
    "systemctl restart freezewatch-agent.service",
]


@pytest.fixture
def collector(tmp_path: Path, sshd: TestSshd) -> Iterator[Running]:
    with running_collector(tmp_path, run_scheduler=False) as running:
        running.add_host(
            NAME,
            ssh=f"root@{sshd.host}:{sshd.port}",
            ssh_key_path=str(sshd.key_path),
            ssh_host_key=sshd.host_key_line,
        )
        yield running


def deploy(c: Running, *args: str) -> tuple[int, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    parsed = build_parser().parse_args(
        ["deploy-agent", NAME, "--db", c.settings.db_url, "--json", *args]
    )
    code = run_deploy_cli(parsed, out=out, err=err)
    assert err.getvalue() == "" or code == 1, err.getvalue()
    return code, json.loads(out.getvalue()) if out.getvalue() else {"error": err.getvalue()}


def files_under(root: Path) -> dict[str, int]:
    """Every file under ``root`` as its host path → mode."""
    return {
        "/" + str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode)
        for p in root.rglob("*")
        if p.is_file()
    }


def factory(c: Running) -> sessionmaker[Session]:
    return db.make_sessionmaker(db.make_engine(c.settings.db_url))


def run_installed_agent(root: Path, tmp: Path) -> subprocess.Popen[bytes]:
    """The installed zipapp under the env file, as the unit's ExecStart would run it, with
    this machine's kernel left alone (no netconsole target, a kmsg file, fixture /proc)."""
    env_file = layout.parse_env((root / layout.ENV_PATH.lstrip("/")).read_text())
    env = {f"FREEZEWATCH_AGENT_{k}": v for k, v in env_file.items() if k != "NETCONSOLE"}
    (tmp / "kmsg").touch()
    argv = [
        "python3", str(root / layout.AGENT_PATH.lstrip("/")), "--interval", "0.2",
        "--proc-root", str(FIXTURES / "proc"), "--kmsg", str(tmp / "kmsg"),
        "--state-dir", str(tmp / "state"), "--no-gpu", "--container-label", "",
        "--canary-interval", "0", "--pstore-dir", str(tmp / "pstore"),
    ]  # fmt: skip
    log = open(tmp / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(argv, env={"PATH": os.environ["PATH"], **env}, stdout=log, stderr=log)


def test_install_report_files_first_batch_upgrade_and_uninstall(
    collector: Running, tmp_path: Path
) -> None:
    root = tmp_path / "hostroot"
    began = time.time()
    code, report = deploy(
        collector, "--root", str(root), "--netconsole", "--collector-url", collector.url
    )
    assert code == 0, report
    facts = report["host_facts"]
    assert facts["user"] == "root" and facts["root"] and facts["systemd"] is SYSTEMD
    assert report["started"] is False and report["heartbeat"] is None
    assert f"installed under {root}" in report["not_started"]
    if not SYSTEMD:  # this machine: the report says so, and what a start would run
        assert "the host does not run systemd" in report["not_started"]
    # The unit may not load modules: the module is loaded now, and at boot by the file below.
    assert report["would_run"] == ["modprobe netconsole", *START]
    assert report["token"] == "issued" and report["changed"] is True

    # Every file it wrote, with its mode, and nothing else.
    expected = {
        layout.AGENT_PATH: 0o755,
        layout.UNIT_PATH: 0o644,
        layout.ENV_PATH: 0o600,
        layout.MODULES_LOAD_PATH: 0o644,
    }
    assert files_under(root) == expected
    order = (layout.AGENT_PATH, layout.UNIT_PATH, layout.ENV_PATH, layout.MODULES_LOAD_PATH)
    assert [f["path"] for f in report["files"]] == [str(root) + p for p in order]
    assert stat.S_IMODE((root / "etc/freezewatch").stat().st_mode) == 0o700
    bundle = zipfile.ZipFile(root / layout.AGENT_PATH.lstrip("/"))
    assert "agent/cli.py" in bundle.namelist() and "__main__.py" in bundle.namelist()
    unit = (root / layout.UNIT_PATH.lstrip("/")).read_text()
    assert f"ExecStart={facts['python3']} {layout.AGENT_PATH}\n" in unit
    assert f"EnvironmentFile=-{layout.ENV_PATH}" in unit and "Restart=always" in unit
    assert (root / layout.MODULES_LOAD_PATH.lstrip("/")).read_text() == "netconsole\n"
    env = layout.parse_env((root / layout.ENV_PATH.lstrip("/")).read_text())
    assert env["COLLECTOR"] == collector.url and env["HOST_NAME"] == NAME
    assert env["NETCONSOLE"] == "127.0.0.1:6666"
    sessions = factory(collector)
    with db.session_scope(sessions) as s:
        host = s.query(Host).filter_by(name=NAME).one()
        assert token_matches(env["TOKEN"], host.token_hash)  # the deploy's token is the host's
        host_id = host.id
    assert any("no FREEZEWATCH_NETCONSOLE_BIND" in w for w in report["warnings"])

    # What systemd would do, done by hand: the installed agent's first batch, reported.
    agent_process = run_installed_agent(root, tmp_path)
    try:
        heard = wait_for_heartbeat(
            sessions, host_id=host_id, since=began, timeout_s=60, clock=time.time,
            sleep=time.sleep,
        )  # fmt: skip
        assert heard is not None, (tmp_path / "agent.log").read_text()
        assert heard.agent_version == agent.__version__ and heard.outdated is False
        assert {"mem", "psi"} <= set(heard.sampling)
        assert {s["source"] for s in heard.sources_off} >= {"gpu", "containers"}
        hosts = httpx.get(f"{collector.url}/api/v1/hosts/{NAME}",
                          headers={"Authorization": f"Bearer {ADMIN}"}).json()  # fmt: skip
        assert (
            hosts["agent"]["version"] == agent.__version__ and hosts["agent"]["outdated"] is False
        )
    finally:
        agent_process.terminate()
        agent_process.wait(20)

    # Again: an upgrade in place that finds nothing to change and keeps the token.
    code, again = deploy(
        collector, "--root", str(root), "--netconsole", "--collector-url", collector.url
    )
    assert code == 0 and again["token"] == "kept" and again["changed"] is False
    assert [f["changed"] for f in again["files"]] == [False] * 4
    assert layout.parse_env((root / layout.ENV_PATH.lstrip("/")).read_text()) == env

    # Without --netconsole: the module no longer loads at boot, the agent no longer sets it up.
    code, plain = deploy(collector, "--root", str(root), "--collector-url", collector.url)
    assert code == 0 and plain["removed"] == [str(root) + layout.MODULES_LOAD_PATH]
    assert layout.MODULES_LOAD_PATH not in files_under(root)
    assert "NETCONSOLE" not in layout.parse_env((root / layout.ENV_PATH.lstrip("/")).read_text())

    # --uninstall removes everything it installed; systemctl would stop the unit.
    code, gone = deploy(collector, "--root", str(root), "--uninstall")
    assert code == 0 and files_under(root) == {}
    assert not (root / "opt/freezewatch").exists() and not (root / "etc/freezewatch").exists()
    assert sorted(gone["removed"]) == sorted(
        [str(root) + p for p in (layout.AGENT_PATH, layout.UNIT_PATH, layout.ENV_PATH)]
        + [str(root) + "/opt/freezewatch", str(root) + "/etc/freezewatch"]
    )
    assert gone["would_run"] == ["systemctl disable --now freezewatch-agent.service",
                                 "systemctl daemon-reload"]  # fmt: skip
    assert gone["kept"] == [str(root) + layout.STATE_DIR]


def test_no_start_says_so_and_installs(collector: Running, tmp_path: Path) -> None:
    root = tmp_path / "img"
    code, report = deploy(collector, "--root", str(root), "--no-start")
    assert code == 0 and "--no-start" in report["not_started"] and report["would_run"] == START
    assert set(files_under(root)) == {layout.AGENT_PATH, layout.UNIT_PATH, layout.ENV_PATH}
    assert any("loopback" not in w for w in report["warnings"]) or report["warnings"] == []


def test_api_deploy_and_its_refusals(collector: Running, tmp_path: Path, sshd: TestSshd) -> None:
    admin = {"Authorization": f"Bearer {ADMIN}"}
    url = f"{collector.url}/api/v1/hosts/{NAME}/deploy"
    body = {"root": str(tmp_path / "api-root"), "collector_url": collector.url}
    assert httpx.post(url, json=body).status_code == 401
    r = httpx.post(url, json=body, headers=admin, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["files"][0]["path"] == str(tmp_path / "api-root") + layout.AGENT_PATH

    collector.add_host("no-ssh")
    r = httpx.post(f"{collector.url}/api/v1/hosts/no-ssh/deploy", json=body, headers=admin)
    assert r.status_code == 400 and "no SSH settings" in r.json()["detail"]

    # A host key other than the stored one: refused before anything is written.
    other = TestSshd().start()
    try:
        collector.add_host(
            "impostor",
            ssh=f"root@{other.host}:{other.port}",
            ssh_key_path=str(other.key_path),
            ssh_host_key=sshd.host_key_line,  # the other server's key differs
        )
        impostor = {**body, "root": str(tmp_path / "impostor-root")}
        r = httpx.post(f"{collector.url}/api/v1/hosts/impostor/deploy", json=impostor,
                       headers=admin, timeout=60)  # fmt: skip
    finally:
        other.close()
    assert r.status_code == 502 and "host key mismatch" in r.json()["detail"]
    assert not (tmp_path / "impostor-root").exists()
