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
