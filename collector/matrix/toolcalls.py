"""The synthetic tools of the tool conversation: declarations, seeded content, call validity."""

from __future__ import annotations

import json
import random
import re
from typing import Any

SYSTEM_PROMPT = (
    "You are a coding agent working in a repository. Always answer by calling exactly one of the "
    "declared tools with the arguments the user asks for; never answer in prose."
)


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _function("read_file", "Read a file of the repository.", {"path": {"type": "string"}}),
    _function(
        "search_code",
        "Search the repository for a string.",
        {"query": {"type": "string"}, "max_results": {"type": "integer"}},
    ),
    _function(
        "list_directory",
        "List a directory of the repository.",
        {"path": {"type": "string"}, "recursive": {"type": "boolean"}},
    ),
    _function(
        "run_tests",
        "Run a test target and return its output.",
        {"target": {"type": "string"}, "verbose": {"type": "boolean"}},
    ),
]
TOOL_REQUIRED = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}

_WORDS = tuple(
    [
        "alloc",
        "buffer",
        "cache",
        "commit",
        "config",
        "context",
        "decode",
        "engine",
        "error",
        "fault",
        "flush",
        "frame",
        "graph",
        "handle",
        "index",
        "kernel",
        "layer",
        "limit",
        "load",
        "memory",
        "module",
        "offset",
        "page",
        "queue",
        "region",
        "request",
        "result",
        "sample",
        "schedule",
        "session",
        "shard",
        "stream",
        "sync",
        "tensor",
        "thread",
        "token",
        "value",
        "worker",
        "write",
    ]
)
_DIRS = ("src", "lib", "tests", "tools", "server", "engine", "kernels", "docs")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{rng.randrange(100)}.py"


def choose_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The tool and arguments the next user turn asks for, drawn from the session's rng."""
    name = rng.choice([t["function"]["name"] for t in TOOLS])
    if name == "read_file":
        return name, {"path": _path(rng)}
    if name == "search_code":
        return name, {"query": f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}", "max_results": 20}
    if name == "list_directory":
        return name, {"path": rng.choice(_DIRS), "recursive": rng.random() < 0.5}
    return name, {"target": f"tests/test_{rng.choice(_WORDS)}.py", "verbose": rng.random() < 0.5}


def user_prompt(turn: int, name: str, args: dict[str, Any]) -> str:
    return f"Step {turn}: call the `{name}` tool with arguments {json.dumps(args, sort_keys=True)}."


def correction_prompt(name: str, args: dict[str, Any], problems: list[str]) -> str:
    return (
        f"Your previous reply was not a valid tool call ({', '.join(problems)}). "
        f"Call the `{name}` tool now with arguments {json.dumps(args, sort_keys=True)}."
    )


def tool_result(seed: int, session: int, turn: int, index: int, size: int) -> str:
    """A deterministic ASCII tool output of exactly `size` bytes (source-like lines)."""
    rng = random.Random(f"{seed}:{session}:{turn}:{index}:result")
    lines = [f"# result of call {index} in step {turn}"]
    total = len(lines[0]) + 1
    number = 1
    while total < size:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(4, 12)))
        line = f"{_path(rng)}:{number}: {words}"
        lines.append(line)
        total += len(line) + 1
        number += 1
    return "\n".join(lines)[:size]


def check_tool_calls(message: dict[str, Any] | None) -> dict[str, Any]:
    """Validity of an assistant message's tool calls, as one JSON-able record."""
    calls = (message or {}).get("tool_calls") or []
    check: dict[str, Any] = {
        "calls": len(calls) if isinstance(calls, list) else 0,
        "id_present": True,
        "name_declared": True,
        "args_object": True,
        "keys_well_formed": True,
        "required_present": True,
        "names": [],
        "problems": [],
    }
    problems: list[str] = check["problems"]
    if not isinstance(calls, list) or not calls:
        problems.append("no tool call")
        for key in ("id_present", "name_declared", "args_object", "keys_well_formed"):
            check[key] = False
        check["required_present"] = False
        check["valid"] = False
        return check
    for call in calls:
        call = call if isinstance(call, dict) else {}
        declared = call.get("function")
        function: dict[str, Any] = declared if isinstance(declared, dict) else {}
        name = function.get("name")
        check["names"].append(name)
        if not isinstance(call.get("id"), str) or not call["id"]:
            check["id_present"] = False
        if name not in TOOL_REQUIRED:
            check["name_declared"] = False
        try:
            args = json.loads(function.get("arguments") or "")
        except (TypeError, ValueError):
            args = None
        if not isinstance(args, dict):
            check["args_object"] = False
            continue
        if not all(isinstance(k, str) and _IDENTIFIER.match(k) for k in args):
            check["keys_well_formed"] = False
        if name in TOOL_REQUIRED and not set(TOOL_REQUIRED[name]) <= set(args):
            check["required_present"] = False
    labels = {
        "id_present": "tool call id missing",
        "name_declared": "tool name not declared",
        "args_object": "arguments not a JSON object",
        "keys_well_formed": "argument keys not identifiers",
        "required_present": "required arguments missing",
    }
    problems += [text for key, text in labels.items() if not check[key]]
    check["valid"] = not problems
    return check
