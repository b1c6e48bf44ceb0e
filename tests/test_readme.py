"""The README's examples are real: every YAML block in it (matrix specs, the guard's rules file)
is read by what reads that file, every JSON body and argv in its commands parses into what the
collector takes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.guard.rules import parse_config
from agent.guard.rulesfile import parse_document
from collector.hosts.config import PowerControl
from collector.matrix.spec import parse_spec_text, validate_spec

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
YAML_BLOCKS = re.findall(r"```yaml\n(.*?)```", README, re.S)
# The agent guard's rules file is YAML too; every other YAML block is a matrix spec.
GUARD_HEADER = "# /etc/freezewatch/guard.yaml"
GUARD_BLOCKS = [b for b in YAML_BLOCKS if b.startswith(GUARD_HEADER)]
SPEC_BLOCKS = [b for b in YAML_BLOCKS if not b.startswith(GUARD_HEADER)]


def test_the_readme_has_its_matrix_and_guard_examples() -> None:
    assert len(SPEC_BLOCKS) >= 2 and GUARD_BLOCKS


@pytest.mark.parametrize("block", SPEC_BLOCKS, ids=lambda b: b.split("\n", 1)[0])
def test_every_yaml_spec_in_the_readme_validates(block: str) -> None:
    spec = validate_spec(parse_spec_text(block))
    assert spec.profiles


@pytest.mark.parametrize("block", GUARD_BLOCKS, ids=lambda b: b.split("\n", 1)[0])
def test_every_guard_rules_file_in_the_readme_parses(block: str) -> None:
    config = parse_config(parse_document(block, name="README"))
    assert config.rules and config.actions


def test_the_json_in_the_readme_commands_parses() -> None:
    bodies = [json.loads(b) for b in re.findall(r"-d '(\{.*?\})'", README)]
    assert {"preset": "nemoclaw-spark-qwen", "host": "spark-01"} in bodies
    hooks = re.findall(r"--power-cycle '(\[.*?\])'", README)
    assert hooks and all(PowerControl(cycle=json.loads(h)).cycle for h in hooks)
