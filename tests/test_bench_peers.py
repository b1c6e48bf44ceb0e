"""bench/peers.py stays runnable: the configs it generates are ones rsyslog, Prometheus and
Alertmanager accept, a quick latency run measures both sides without losing a line, and an
interrupted run leaves none of its processes behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench import _peers_prom as prom
from bench import _peers_rsyslog as rsyslog
from bench._peers_report import Figures
from tests.support.skips import require

ROOT = Path(__file__).resolve().parent.parent
PROMTOOL = Path("/usr/bin/promtool")
AMTOOL = Path("/usr/bin/amtool")


def bench_processes(tmp: Path) -> list[str]:
    """Command lines of processes that name ``tmp`` (the bench's TMPDIR) in their arguments
    or environment: every process the bench started does."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(tmp).encode() in cmdline + environ:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def bench(*args: str) -> list[str]:
    """The bench's argv (SQLite, kernel lines from a file: no system setting touched)."""
    return [sys.executable, "bench/peers.py", "--backends", "sqlite", "--kmsg-mode", "file", *args]


def bench_env(tmp: Path) -> dict[str, str]:
    """``tmp`` as the bench's TMPDIR, so its processes can be told apart from others'."""
    return {**os.environ, "TMPDIR": str(tmp)}


@pytest.mark.parametrize("source", [None, Path("/tmp/kmsg")], ids=["imkmsg", "imfile"])
def test_rsyslog_accepts_the_generated_configs(tmp_path: Path, source: Path | None) -> None:
    require(*rsyslog.available())
    receiver = rsyslog.receiver_config(tmp_path, 5514, tmp_path / "out.log")
    assert rsyslog.validate(receiver, tmp_path) == ""
    assert rsyslog.validate(rsyslog.sender_config(tmp_path, 5514, source), tmp_path) == ""


def test_rsyslog_rejects_a_broken_config(tmp_path: Path) -> None:
    require(*rsyslog.available())
    assert rsyslog.validate('module(load="imnothere")\n', tmp_path) != ""


@pytest.mark.parametrize("variant", sorted(prom.VARIANTS))
def test_prometheus_and_alertmanager_accept_the_generated_configs(
    tmp_path: Path, variant: str
) -> None:
    require(*prom.available())
    require(
        PROMTOOL.exists() and AMTOOL.exists(), "promtool/amtool missing (apt install prometheus)"
    )
    v = prom.VARIANTS[variant]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(prom.rules_config(v)))
    config = prom.prometheus_config(v, ["127.0.0.1:9100"], 9093, tmp_path / "rules.yml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "am.yml").write_text(yaml.safe_dump(prom.alertmanager_config(v, "http://x/h")))
    checks = [
        [str(PROMTOOL), "check", "config", str(tmp_path / "prometheus.yml")],
        [str(AMTOOL), "check-config", str(tmp_path / "am.yml")],
    ]
    for argv in checks:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_summary_keeps_every_required_key_and_takes_medians() -> None:
    figures = Figures()
    for fw, peer in ((10.0, 2.0), (30.0, 3.0), (12.0, 4.0)):
        figures.pair("a_fw", fw, "a_peer", peer, "a_ratio")
    summary = figures.summary(("a_ratio", "not_measured"))
    # the median of each run's own ratio (5, 10, 3), not the ratio of the medians (12 / 3)
    assert summary["a_ratio"] == 5.0
    assert summary["a_fw"] == 12.0 and summary["not_measured"] is None


def test_a_quick_latency_run_measures_both_sides(tmp_path: Path) -> None:
    require(*rsyslog.available())
    done = subprocess.run(
        bench("--quick", "--only", "latency", "--lines", "5"),
        cwd=ROOT,
        env=bench_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["kmsg_mode"] == "file"
    assert summary["latency_missing_fw"] == 0 and summary["latency_missing_rsyslog"] == 0
    for key in ("latency_p50_ms_fw", "latency_p50_ms_rsyslog", "latency_p50_ratio_vs_rsyslog"):
        assert summary[key] > 0, key
    assert summary["burst_ratio_vs_rsyslog"] is None  # not run, still present
    assert bench_processes(tmp_path) == []


@pytest.mark.parametrize("when", ["rsyslogd", "collector serve"])
def test_an_interrupted_run_stops_every_process_it_started(tmp_path: Path, when: str) -> None:
    """SIGTERM as soon as rsyslog's receiver runs (the sender being started), and while the
    collector starts."""
    require(*rsyslog.available())
    out = tmp_path / "bench.out"
    with open(out, "wb") as sink:
        run = subprocess.Popen(
            bench("--only", "latency"),
            cwd=ROOT,
            env=bench_env(tmp_path),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not any(when in c for c in bench_processes(tmp_path)):
            assert run.poll() is None and time.monotonic() < deadline, f"no {when} started"
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        # One shared stop grace (10 s) and the SIGKILLs after it, on a machine a full test run
        # loads to ~9 runnable processes per core.
        try:
            run.wait(120)
        except subprocess.TimeoutExpired:
            left = bench_processes(tmp_path)
            raise AssertionError(f"still running: {left}\n{out.read_text()[-3000:]}") from None
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert bench_processes(tmp_path) == []
