from pathlib import Path

import pytest

from agent.config import parse_args


def test_flags_and_defaults() -> None:
    cfg = parse_args(
        ["--collector", "http://c:8080", "--token", "t", "--host-name", "spark-01"], {}
    )
    assert cfg.collector == "http://c:8080"
    assert cfg.token == "t"
    assert cfg.host_name == "spark-01"
    assert cfg.interval == 1.0
    assert cfg.proc_root == Path("/proc")
    assert cfg.kmsg == Path("/dev/kmsg")
    assert cfg.state_dir == Path("/var/lib/freezewatch")
    assert cfg.spool_max_mb == 256.0


def test_env_fills_in_and_flag_wins() -> None:
    env = {
        "FREEZEWATCH_AGENT_COLLECTOR": "http://env:1",
        "FREEZEWATCH_AGENT_TOKEN": "envtok",
        "FREEZEWATCH_AGENT_INTERVAL": "0.5",
        "FREEZEWATCH_AGENT_SPOOL_MAX_MB": "8",
        "FREEZEWATCH_AGENT_KMSG": "/tmp/k",
    }
    cfg = parse_args(["--interval", "2"], env)
    assert cfg.collector == "http://env:1"
    assert cfg.token == "envtok"
    assert cfg.interval == 2.0  # the flag beats the environment
    assert cfg.spool_max_mb == 8.0
    assert cfg.kmsg == Path("/tmp/k")


def test_host_name_defaults_to_hostname() -> None:
    import socket

    cfg = parse_args(["--collector", "http://c", "--token", "t"], {})
    assert cfg.host_name == socket.gethostname()


def test_missing_required_is_an_error() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--collector", "http://c"], {})


def test_help_shows_each_default_the_agent_runs_with(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"], {})
    flags = capsys.readouterr().out.split("\n  --")[1:]  # one chunk per flag, wrapped
    shown = {"--" + chunk.split()[0]: " ".join(chunk.split()) for chunk in flags}
    cfg = parse_args(["--collector", "http://c", "--token", "t"], {})
    assert f"(default: {cfg.state_dir})" in shown["--state-dir"]
    assert f"(default: {cfg.interval})" in shown["--interval"]
    assert f"(default: {cfg.container_label})" in shown["--container-label"]
    assert "(default: /sys/fs/pstore, /var/lib/systemd/pstore)" in shown["--pstore-dir"]
    assert cfg.pstore_dir == (Path("/sys/fs/pstore"), Path("/var/lib/systemd/pstore"))
    assert "(default: hostname)" in shown["--host-name"]  # said once, by its own help
    assert "(default:" not in shown["--no-gpu"] and "(default:" not in shown["--vllm-url"]
