"""Reading rules files with the standard library: the README's example as PyYAML reads it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.guard.rules import parse_config
from agent.guard.rulesfile import RulesFileError, load_rules_file, parse_document

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_guard_section() -> str:
    text = README.read_text()
    return text.split("## The guard", 1)[1].split("\n## ", 1)[0]


def test_the_readme_example_reads_as_yaml_reads_it(tmp_path: Path) -> None:
    example = readme_guard_section().split("```yaml\n", 1)[1].split("```", 1)[0]
    assert parse_document(example) == yaml.safe_load(example)
    (tmp_path / "guard.yaml").write_text(example)
    config = parse_config(load_rules_file(tmp_path / "guard.yaml"))
    assert [r.kind for r in config.rules] == [
        "mem_available_below", "psi_above", "swap_used_growth_above", "kernel_event",
        "mem_available_below",
    ]  # fmt: skip
    assert [a.kind for a in config.actions] == ["docker_stop", "signal", "command"]
    assert config.actions[1].fallback and config.cooldown_s == 300
    assert config.rules[4].phases == ("serving",) and config.phases is not None


def test_the_readme_json_example() -> None:
    inline = re.search(r"The same as JSON: `([^`]+)`", readme_guard_section(), re.S)
    assert inline is not None
    config = parse_config(parse_document(inline.group(1).replace("\n", " ")))
    assert config.rules[0].text == "mem_available_below: 4GiB for 2s"


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb:\n  - x\n  - {k: v, n: [1, 2.5, true, null]}\n",
        "rules:\n- mem_available_below: 4GiB   # comment\n  phases: [serving]\n",
        "'quoted: key': \"a # not a comment\"\nurl: http://x:8000/a\n",
        "top:\n  nested:\n    deep: ~\n  other: 'it''s'\n",
        "--- \n- [a, b]\n- []\n- {}\n",
    ],
)
def test_the_subset_agrees_with_pyyaml(text: str) -> None:
    assert parse_document(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &anchor 1", "line 1: '&' is YAML this reader lacks"),
        ("a: |\n  text", "line 1: '|' is YAML this reader lacks"),
        ("a:\n\tb: 1", "line 2: tabs cannot indent YAML"),
        ("a: [1, 2", "line 1: expected ',' or ']'"),
        ("a: 1\n  b: 2", "line 2: unexpected indentation"),
        ("a: 1\na: 2", "line 2: 'a' given twice"),
        ('{"a": }', "line 1: Expecting value"),
    ],
)
def test_what_it_cannot_read_is_an_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(RulesFileError, match=re.escape(message)):
        parse_document(text, name="guard.yaml")


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(RulesFileError, match="No such file"):
        load_rules_file(tmp_path / "none.yaml")


def flow(value: Any) -> Any:
    return parse_document(f"k: {value}")["k"]


def test_scalars() -> None:
    assert [flow(v) for v in ("4GiB for 2s", "1GiB/10s", "20", "1.5", "yes", "'20'")] == [
        "4GiB for 2s", "1GiB/10s", 20, 1.5, True, "20",
    ]  # fmt: skip
