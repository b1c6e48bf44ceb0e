"""The README's examples are real: every fenced YAML or JSON block, every JSON body inline or in
a command, every JSON argv and guard flag in it is classified (matrix spec, guard rules file,
API body of a named route, ...) and read by what reads it in the product: the matrix spec
parser, the agent's guard parser, the API's body models. A new example of an unknown kind
fails here until it is classified."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.config import OPTIONS
from agent.guard.rules import parse_config
from agent.guard.rulesfile import parse_document
from collector.api.deploy import DeployIn
from collector.api.matrix import RunRequest
from collector.api.webhooks import WebhookIn
from collector.hosts.config import HostPatch, PowerControl
from collector.matrix.spec import parse_spec_text, validate_spec
from collector.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCES = re.findall(r"^```([\w-]*)\n(.*?)^```", README, re.S | re.M)
GUARD_HEADER = "# /etc/freezewatch/guard.yaml"
# Inline spans that show a shape in prose (fields of a payload or an answer), not a body.
PROSE_SHAPES = {'{"text": ...}', '{"ok", "status", "error"}'}


def guard_file(data: Any) -> None:
    config = parse_config(data)
    assert config.rules and config.actions


def matrix_spec(data: Any) -> None:
    assert validate_spec(data).profiles


def body(model: Any) -> Callable[[Any], None]:
    """An API body: every key one the route takes, and it validates."""

    def check(data: Any) -> None:
        assert set(data) <= set(model.model_fields), f"{model.__name__}: unknown keys in {data}"
        model.model_validate(data)

    return check


def openapi_client_config(data: Any) -> None:
    assert set(data) == {"content_type_overrides"}


BODIES: list[tuple[str, set[str], Callable[[Any], None]]] = [
    ("guard rules file", {"rules", "actions", "cooldown", "phases"}, guard_file),
    ("POST /api/v1/matrix-runs", set(RunRequest.model_fields), body(RunRequest)),
    ("PATCH /api/v1/hosts/{name}", set(HostPatch.model_fields), body(HostPatch)),
    ("POST /api/v1/hosts/{name}/deploy", set(DeployIn.model_fields), body(DeployIn)),
    ("POST /api/v1/webhooks", set(WebhookIn.model_fields), body(WebhookIn)),
    ("openapi-python-client config", {"content_type_overrides"}, openapi_client_config),
]


def classify(data: Any) -> tuple[str, Callable[[Any], None]]:
    """What a JSON/YAML example is, by its keys, and what reads it."""
    assert isinstance(data, dict) and data, f"an example that is not a mapping: {data!r}"
    if {"host", "base_args"} <= set(data):
        return "matrix spec", matrix_spec
    for name, fields, check in BODIES:
        if set(data) <= fields:
            return name, check
    raise AssertionError(f"unclassified example in the README: {data!r}")


def examples() -> list[tuple[str, str, Any]]:
    """(where, how it was written, the parsed value) of every example."""
    found: list[tuple[str, str, Any]] = []
    for lang, block in FENCES:
        first = block.split("\n", 1)[0]
        if lang in ("yaml", "yml"):
            if block.startswith(GUARD_HEADER):
                found.append((f"yaml: {first}", "guard", parse_document(block, name="README")))
            else:
                found.append((f"yaml: {first}", "yaml", parse_spec_text(block)))
        elif lang == "json":
            found.append((f"json: {first}", "json", json.loads(block)))
        elif lang in ("", "sh", "shell", "bash", "console"):
            for text in re.findall(r"(?:-d|echo) '(\{.*?\})'", block, re.S):
                found.append((f"command: {text[:40]}", "json", json.loads(text)))
    for span in re.findall(r"`(\{\".*?\})`", README, re.S):
        span = " ".join(span.split())
        if span not in PROSE_SHAPES:
            found.append((f"inline: {span[:40]}", "json", json.loads(span)))
    return found


EXAMPLES = examples()


def test_the_readme_examples_are_found() -> None:
    kinds = Counter(classify(value)[0] for _, _, value in EXAMPLES)
    assert kinds["matrix spec"] >= 3 and kinds["guard rules file"] >= 2, kinds
    assert kinds["POST /api/v1/matrix-runs"] and kinds["PATCH /api/v1/hosts/{name}"] >= 2
    assert kinds["POST /api/v1/hosts/{name}/deploy"] >= 3, kinds
    # Every fence is a language the test reads: a ```yaml typo would hide an example.
    assert {lang for lang, _ in FENCES} <= {"", "yaml", "json", "python"}


@pytest.mark.parametrize(("where", "form", "value"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_every_example_is_read_by_what_reads_it(where: str, form: str, value: Any) -> None:
    kind, check = classify(value)
    if form == "guard":
        assert kind == "guard rules file", where
    check(value)


@pytest.mark.parametrize("block", [b for lang, b in FENCES if lang == "python"])
def test_the_python_examples_compile(block: str) -> None:
    compile(block, "README.md", "exec")


def test_the_argv_and_flags_in_the_readme_commands_parse() -> None:
    hooks = re.findall(r"--power-cycle '(\[.*?\])'", README)
    assert hooks and all(PowerControl(cycle=json.loads(h)).cycle for h in hooks)
    rules = re.findall(r"--guard-rule '(.*?)'", README)
    actions = re.findall(r"--guard-action ([a-z_]+)", README)
    assert rules and actions
    flags = {
        "rules": [parse_document(r, name="--guard-rule") for r in rules],
        "actions": [parse_document(a, name="--guard-action") for a in actions],
    }
    assert len(parse_config(flags).rules) == len(rules)


def test_every_variable_the_readme_names_is_read() -> None:
    """A FREEZEWATCH_* name in the README is a collector setting, an agent flag's variable or
    what the guard's command action is given; `FREEZEWATCH_RETAIN_*`-style prefixes aside."""
    named = set(re.findall(r"\bFREEZEWATCH_[A-Z0-9_]*[A-Z0-9]\b", README))
    read = {f"FREEZEWATCH_{field.upper()}" for field in Settings.model_fields}
    read |= {opt.env for opt in OPTIONS} | {"FREEZEWATCH_GUARD_RULE", "FREEZEWATCH_GUARD_VALUES"}
    suite = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")  # the tests' own
    read |= set(re.findall(r'"(FREEZEWATCH_TEST_[A-Z0-9_]+)"', suite))
    assert named and not named - read, sorted(named - read)


def test_make_bench_runs_every_script_the_performance_table_names() -> None:
    table = README[README.index("| script | what it measures |") :].split("\n\n", 1)[0]
    scripts = set(re.findall(r"^\| `(bench/\w+\.py)`", table, re.M))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile[makefile.index("\nbench:") :].split("\n\n", 1)[0]
    run = set(re.findall(r"\$\(PY\) (bench/\w+\.py)", recipe))
    assert len(scripts) > 10 and not scripts - run, sorted(scripts - run)
