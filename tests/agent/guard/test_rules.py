"""Reading guard rules: units, every error named (never a guess), flags added to the file."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.config import parse_args
from agent.guard.kernel import matches
from agent.guard.rules import (
    GuardConfigError,
    KernelMatch,
    parse_config,
    parse_duration,
    parse_size,
)
from agent.guard.setup import build_guard, read_guard_config
from agent.kernel.classify import classify_kernel_line
from tests.support.proctree import GIB

from .conftest import Events


@pytest.mark.parametrize(
    ("text", "size"),
    [("4GiB", 4 * GIB), ("4G", 4 * GIB), ("512MiB", 512 << 20), ("4GB", 4e9), (1024, 1024)],
)
def test_sizes(text: Any, size: float) -> None:
    assert parse_size(text, "x") == size


@pytest.mark.parametrize(
    ("text", "seconds"), [("2s", 2), ("500ms", 0.5), ("5m", 300), ("1h", 3600), (3, 3)]
)
def test_durations(text: Any, seconds: float) -> None:
    assert parse_duration(text, "x") == seconds


def config(rules: list[Any], actions: list[Any] | None = None, **top: Any) -> Any:
    return parse_config(
        {"rules": rules, "actions": ["docker_stop"] if actions is None else actions, **top}
    )


def test_every_rule_kind() -> None:
    parsed = config(
        [
            {"mem_available_below": "4GiB for 2s"},
            {"psi_memory_full_avg10_above": "20 for 3s"},
            {"psi_io_some_avg60_above": 50},
            {"swap_used_growth_above": "1GiB/10s"},
            {"kernel_event": ["nv_err NV_ERR_NO_MEMORY", "xid fatal", "xid 79", "oom_kill"]},
            {"mem_available_below": "2GiB", "phases": ["serving"]},
        ],
        cooldown="1m",
    )
    mem, psi, io, swap, kernel, phased = parsed.rules
    assert (mem.threshold, mem.hold_s, mem.text) == (
        4 * GIB,
        2.0,
        "mem_available_below: 4GiB for 2s",
    )
    assert (psi.kind, psi.psi, psi.threshold, psi.hold_s) == (
        "psi_above",
        ("memory", "full", "avg10"),
        20,
        3,
    )
    assert io.psi == ("io", "some", "avg60") and io.hold_s == 0
    assert (swap.threshold, swap.hold_s) == (GIB, 10.0)
    nv_err, fatal = KernelMatch("nv_err", "NV_ERR_NO_MEMORY"), KernelMatch("xid", "fatal")
    assert kernel.kernel == (nv_err, fatal, KernelMatch("xid", 79), KernelMatch("oom_kill"))
    assert kernel.text == "kernel_event: [nv_err NV_ERR_NO_MEMORY, xid fatal, xid 79, oom_kill]"
    assert phased.phases == ("serving",) and parsed.cooldown_s == 60
    assert parsed.summary()["state"] == "armed"


def test_aer_fatal_matches_only_a_fatal_aer() -> None:
    """``aer fatal``: stop vLLM when the GPU's link failed, not on a non-fatal error."""
    (rule,) = config([{"kernel_event": ["aer fatal"]}]).rules
    assert rule.kernel == (KernelMatch("aer", "fatal"),)
    line = "pcieport 0000:00:02.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Tr"
    fatal = classify_kernel_line(line)
    nonfatal = classify_kernel_line(line.replace("(Fatal)", "(Non-Fatal)"))
    assert fatal is not None and nonfatal is not None
    assert matches("aer", "fatal", fatal) and not matches("aer", "fatal", nonfatal)
    assert matches("aer", None, nonfatal)


def test_iommu_matches_any_devices_refused_dma() -> None:
    """``iommu``: stop vLLM on any IOMMU fault, whichever device it names (no qualifier)."""
    (rule,) = config([{"kernel_event": ["iommu"]}]).rules
    assert rule.kernel == (KernelMatch("iommu"),)
    named = classify_kernel_line(  # real SMMUv3 messages (tests/fixtures/real/kernel)
        "arm-smmu-v3 arm-smmu-v3.5.auto: event: F_TRANSLATION client: 0001:06:00.0 sid: "
        "0x20600 ssid: 0x0 iova: 0xff9bc000 ipa: 0x0"
    )
    header = classify_kernel_line("arm-smmu-v3 arm-smmu-v3.1.auto: event 0x10 received:")
    assert named is not None and header is not None
    assert matches("iommu", None, named) and matches("iommu", None, header)


MEM = {"mem_available_below": "4GiB"}
STOP = ["docker_stop"]


@pytest.mark.parametrize(
    ("rules", "actions", "message"),
    [
        ([{"mem_available_belw": "4GiB"}], STOP, "unknown rule 'mem_available_belw'"),
        ([{"mem_available_below": "4 gigs"}], STOP, "not a size"),
        ([{"mem_available_below": "4GiB for 2 days"}], STOP, "not a duration"),
        ([{"swap_used_growth_above": "1GiB"}], STOP, "growth over a window"),
        ([{"kernel_event": ["xid bad"]}], STOP, "'xid fatal' or 'xid <code>'"),
        ([{"kernel_event": ["nvidia_err"]}], STOP, "unknown kernel event kind"),
        ([{"kernel_event": ["oom_kill vllm"]}], STOP, "takes no qualifier"),
        ([{"kernel_event": ["aer nonfatal"]}], STOP, "'aer' or 'aer fatal'"),
        ([{"kernel_event": ["iommu F_TRANSLATION"]}], STOP, "takes no qualifier"),
        ([{**MEM, "phases": ["warmup"]}], STOP, "unknown vLLM phase"),
        ([MEM], [], "no actions"),
        ([], STOP, "at least one rule"),
        ([MEM], ["reboot"], "unknown action 'reboot'"),
        ([MEM], [{"docker_stop": {"grace": 1}}], "unknown option 'grace'"),
        ([MEM], [{"signal": {"signal": "TERM"}}], "cmdline_contains or pid_file"),
        ([MEM], [{"signal": {"pid_file": "/p", "signal": "NOPE"}}], "unknown signal"),
        ([MEM], [{"command": {"argv": "rm -rf /"}}], "a list of strings"),
        ([MEM], ["unit"], "name of the systemd unit"),
    ],
)
def test_errors_name_what_is_wrong(rules: list[Any], actions: list[Any], message: str) -> None:
    with pytest.raises(GuardConfigError, match=message):
        parse_config({"rules": rules, "actions": actions})


def test_an_unknown_top_level_key_is_an_error() -> None:
    with pytest.raises(GuardConfigError, match="unknown key 'rule'"):
        parse_config({"rule": [MEM], "actions": STOP})


def test_dry_run_needs_no_actions_and_the_flag_wins() -> None:
    parsed = parse_config({"rules": [{"mem_available_below": "4GiB"}]}, dry_run=True)
    assert parsed.actions == () and parsed.summary()["state"] == "dry_run"
    assert parse_config({"rules": [{"mem_available_below": "4GiB"}], "dry_run": True}).dry_run


def agent_config(*flags: str) -> Any:
    return parse_args(["--collector", "http://c", "--token", "t", *flags], {})


def test_off_by_default() -> None:
    events = Events()
    guard, summary = build_guard(agent_config(), events)
    assert guard is None and summary == {"state": "off"} and events.items == []


def test_flags_alone_or_added_to_a_file(tmp_path: Path) -> None:
    flags = agent_config(
        "--guard-rule", "kernel_event: [nv_err NV_ERR_NO_MEMORY, xid fatal]",
        "--guard-action", "docker_stop: {timeout: 20s}", "--guard-cooldown", "2m",
    )  # fmt: skip
    parsed = read_guard_config(flags)
    assert parsed is not None and parsed.source == "flags" and parsed.cooldown_s == 120
    assert parsed.rules[0].kernel == (
        KernelMatch("nv_err", "NV_ERR_NO_MEMORY"),
        KernelMatch("xid", "fatal"),
    )
    assert parsed.actions[0].options["timeout"] == 20
    rules = tmp_path / "guard.yaml"
    rules.write_text("rules:\n  - mem_available_below: 4GiB for 2s\nactions:\n  - docker_stop\n")
    both = read_guard_config(
        agent_config("--guard", str(rules), "--guard-rule", "psi_memory_full_avg10_above: 20")
    )
    assert both is not None and [r.kind for r in both.rules] == ["mem_available_below", "psi_above"]
    prefix = "FREEZEWATCH_AGENT_"
    environ = {"COLLECTOR": "http://c", "TOKEN": "t", "GUARD": str(rules), "GUARD_DRY_RUN": "1"}
    env = parse_args([], {prefix + k: v for k, v in environ.items()})
    guard, summary = build_guard(env, Events())
    assert guard is not None and summary["state"] == "dry_run" and summary["source"] == str(rules)
    assert summary["crc32"] == f"{zlib.crc32(rules.read_bytes()):08x}"


def test_a_broken_rules_file_leaves_the_guard_off_and_says_why(tmp_path: Path) -> None:
    rules = tmp_path / "guard.yaml"
    rules.write_text("rules:\n  - mem_available_below: 4 gigs\nactions: [docker_stop]\n")
    events = Events()
    guard, summary = build_guard(
        agent_config("--guard", str(rules), "--state-dir", str(tmp_path)), events
    )
    assert guard is None and summary["state"] == "error" and "not a size" in summary["error"]
    assert events.of("source_error")[0]["source"] == "guard"
    missing = build_guard(agent_config("--guard", str(tmp_path / "none.yaml")), Events())[1]
    assert missing["state"] == "error" and "No such file" in missing["error"]


def test_guard_check_prints_the_guard_or_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "guard.yaml"
    rules.write_text("rules: [{mem_available_below: 4GiB for 2s}]\nactions: [docker_stop]\n")
    assert main(["--guard-check", "--guard", str(rules)]) == 0  # no collector or token needed
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "armed" and shown["rules"] == ["mem_available_below: 4GiB for 2s"]
    rules.write_text("rules: [{mem_available_below: 4GiB}]\n")
    assert main(["--guard-check", "--guard", str(rules)]) == 2
    assert "no actions" in capsys.readouterr().err
    assert main(["--guard-check"]) == 0 and "off" in capsys.readouterr().out


def test_guard_check_shows_a_rules_own_phases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule limited to phases says so: without them it would read as a rule for every phase."""
    rules = tmp_path / "guard.yaml"
    rules.write_text(
        "phases: [loading_weights, serving]\n"
        "rules:\n  - mem_available_below: 4GiB for 2s\n"
        "  - {mem_available_below: 2GiB, phases: [serving]}\nactions: [docker_stop]\n"
    )
    assert main(["--guard-check", "--guard", str(rules)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["rules"] == [
        "mem_available_below: 4GiB for 2s",
        "mem_available_below: 2GiB, phases: [serving]",
    ]
    assert shown["phases"] == ["loading_weights", "serving"]
