"""Post-mortem after a reboot: artifacts over a real sshd, retries while the host boots."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from collector import db
from collector.incidents import postmortem
from collector.liveness import checker
from collector.models import Artifact, Incident
from collector.remote.commands import RunResult
from collector.remote.ssh import SSHClient
from collector.timeutil import utcnow
from tests.collector.conftest import Collector
from tests.collector.freeze_support import BOOT_B, factory, post
from tests.support.real_corpus import REAL
from tests.support.sshd import TestSshd


def rebooted_incident(c: Collector, ssh: str | None, key: str | None, host_key: str | None) -> int:
    token = c.add_host("spark-01")
    if ssh:
        r = c.client.patch(
            "/api/v1/hosts/spark-01",
            headers=c.admin,
            json={"ssh": ssh, "ssh_key_path": key, "ssh_host_key": host_key},
        )
        assert r.status_code == 200, r.text
    post(c, token, "spark-01")
    [iid] = checker.check_heartbeats(
        factory(c),
        now=utcnow() + timedelta(seconds=10),
        settings=c.settings,
        probe_runner=lambda _t: [],
    )
    post(c, token, "spark-01", boot=BOOT_B)
    return iid


def test_postmortem_over_real_ssh_stores_artifacts(
    sshd: TestSshd, tmp_path: Path, sqlite_url: str
) -> None:
    from tests.collector.conftest import make_collector

    pstore = tmp_path / "pstore"
    pstore.mkdir()
    real = (REAL / "pstore" / "dmesg-erst-7530486857247752193").read_bytes()
    (pstore / "dmesg-erst-7530486857247752193").write_bytes(real)
    (pstore / "console-ramoops-0").write_text("last console words\n")
    gen = make_collector(
        sqlite_url,
        pstore_dir=str(pstore),
        postmortem_commands=[
            {"name": "echo", "argv": ["echo", "previous boot"]},
            {"name": "fails", "argv": ["sh", "-c", "echo oops >&2; exit 3"]},
        ],
    )
    c = next(gen)
    iid = rebooted_incident(
        c, f"{sshd.user}@{sshd.host}:{sshd.port}", str(sshd.key_path), sshd.host_key_line
    )
    assert postmortem.collect_postmortems(factory(c), now=utcnow(), settings=c.settings) == [iid]
    detail = c.client.get(f"/api/v1/incidents/{iid}", headers=c.admin).json()
    assert detail["postmortem"]["state"] == "done"
    arts = {a["name"]: a for a in detail["artifacts"]}
    assert set(arts) == {
        "echo",
        "fails",
        "pstore-list",
        "pstore/console-ramoops-0",
        "pstore/dmesg-erst-7530486857247752193",
    }
    assert arts["fails"]["exit_status"] == 3 and "oops" in arts["fails"]["stderr"]
    assert arts["echo"]["exit_status"] == 0 and arts["echo"]["duration_s"] >= 0
    name = "pstore/dmesg-erst-7530486857247752193"
    r = c.client.get(f"/api/v1/incidents/{iid}/artifacts/{name}", headers=c.admin)
    assert r.status_code == 200 and "Kernel panic" in r.text
    # The pstore file went through the kernel classifier: one panic, in the module that raised it.
    [panic] = arts[name]["kernel_events"]
    assert (panic["kind"], panic["code"], panic["module"]) == ("oops", "panic", "crash_test")
    assert (panic["severity"], panic["action"]) == ("fatal", "reboot")
    assert arts["pstore/console-ramoops-0"]["kernel_events"] == []
    assert arts["echo"]["kernel_events"] == []
    assert (
        c.client.get(f"/api/v1/incidents/{iid}/artifacts/nope", headers=c.admin).status_code == 404
    )
    gen.close()


class FlakyRunner(SSHClient):
    """An SSH layer whose connections are refused ``failures`` times, then succeed."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls: list[tuple[str, ...]] = []

    def run(self, target: Any, argv: Any, **_options: Any) -> Any:  # type: ignore[override]
        self.calls.append(tuple(argv))
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("host still booting")
        out = b"" if argv[0] == "find" else b"kernel: log\n"
        return RunResult(
            argv=tuple(argv),
            stdout=out,
            stderr=b"",
            exit_status=0,
            duration_s=0.01,
            timed_out=False,
            truncated=False,
        )


def test_postmortem_retries_while_host_boots(collector: Collector) -> None:
    iid = rebooted_incident(collector, "root@127.0.0.1:1", None, "ssh-ed25519 AAAA")
    sf, settings = factory(collector), collector.settings
    runner = FlakyRunner(failures=2)
    now = utcnow()
    assert postmortem.collect_postmortems(sf, now=now, settings=settings, ssh=runner) == []
    # Not due again until the retry delay passed.
    assert postmortem.collect_postmortems(sf, now=now, settings=settings, ssh=runner) == []
    assert len(runner.calls) == 1
    for step in range(1, 4):
        done = postmortem.collect_postmortems(
            sf,
            now=now + timedelta(seconds=settings.postmortem_retry_s * step * 2),
            settings=settings,
            ssh=runner,
        )
    assert done == [] and len(runner.calls) > 2
    with db.session_scope(sf) as s:
        incident = s.get(Incident, iid)
        assert incident is not None
        assert (incident.postmortem_state, incident.postmortem_attempts) == ("done", 3)
        names = set(s.scalars(select(Artifact.name).where(Artifact.incident_id == iid)))
        assert {
            "journal-kernel-prev-boot",
            "journal-warnings-prev-boot",
            "pstore-list",
            "postmortem-error",
        } <= names


def test_postmortem_gives_up_without_failing(collector: Collector) -> None:
    iid = rebooted_incident(collector, "root@127.0.0.1:1", None, None)
    sf, settings = factory(collector), collector.settings
    runner = FlakyRunner(failures=1000)
    for step in range(settings.postmortem_attempts + 2):
        postmortem.collect_postmortems(
            sf, now=utcnow() + timedelta(hours=step), settings=settings, ssh=runner
        )
    with db.session_scope(sf) as s:
        incident = s.get(Incident, iid)
        assert incident is not None and incident.postmortem_state == "failed"
        assert incident.postmortem_attempts == settings.postmortem_attempts
