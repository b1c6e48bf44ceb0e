"""The layout holds: one package per domain, arrows one way, no circles, no hidden imports.

Read from the source with ``ast`` (nothing is imported), so a new module is checked the day it
is added. The order below is the architecture; DESIGN.md and the README describe it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module may import modules of its own package and of packages listed before
# its own, never after: api/web → domains → db/models.
LAYERS = (
    ("sqlite_codes", "errors", "settings", "timeutil", "heap", "packing", "trouble"),
    ("models",),
    (
        "db",
        "bulk",
        "sqlite_tuning",
        "prepared",
        "schemas",
        "links",
        "auth",
        "sessions",
        "origin",
        "throttle",
        "leader",
    ),
    ("remote",),
    ("hosts",),
    ("readback",),
    ("alerts",),
    ("vllm",),
    ("kernel",),
    ("guard",),
    ("incidents",),
    ("liveness",),
    ("ingest",),
    ("netconsole",),
    ("matrix",),
    ("retention",),
    ("metrics", "deploy", "inspect", "demo", "scheduler"),
    ("deps", "params"),
    ("api", "web"),
    ("main",),
    ("serve",),
    ("workers",),
    ("cli", "__main__"),
)
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
DOMAINS = (
    "remote", "hosts", "readback", "alerts", "vllm", "kernel", "guard", "incidents", "liveness",
    "ingest", "netconsole", "matrix", "retention", "metrics", "deploy", "api", "web",
)  # fmt: skip


def modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(path: Path, module: str) -> Iterator[tuple[str, bool]]:
    """(imported module, inside a function or class body) for every import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, nested: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, nested
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                for alias in child.names:
                    yield f"{base}.{alias.name}", nested
                    yield base, nested
            else:
                yield from walk(child, inner)

    yield from walk(tree, False)


def graph() -> dict[str, set[str]]:
    known = dict(modules("collector")) | dict(modules("agent"))
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = {name for name, _ in imports(path, module) if name in known and name != module}
        edges[module] = targets
    return edges


def top(module: str) -> str:
    """The layer name of a collector module: its package, or the top-level module itself."""
    return module.split(".")[1] if module.count(".") else module


def test_every_collector_module_is_placed_in_a_layer() -> None:
    unplaced = sorted({top(m) for m, _ in modules("collector") if m != "collector"} - set(RANK))
    assert unplaced == [], f"add these to LAYERS: {unplaced}"


def test_arrows_run_one_way() -> None:
    upward = [
        f"{a} -> {b}"
        for a, targets in graph().items()
        if a.startswith("collector.")
        for b in targets
        if b.startswith("collector.") and top(a) != top(b) and RANK[top(a)] < RANK[top(b)]
    ]
    assert upward == []


def test_no_circles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert circles == []


def test_no_import_inside_a_function() -> None:
    """The collector's imports sit at the top of a module. (The agent loads a source's module
    only when that source is configured: its RSS on the GPU host is a target.)"""
    hidden = [
        f"{module}: {name}"
        for module, path in modules("collector")
        for name, nested in imports(path, module)
        if nested
    ]
    assert hidden == []


def test_the_agent_imports_nothing_from_the_collector() -> None:
    leaks = [
        f"{a} -> {b}"
        for a, targets in graph().items()
        if a.startswith("agent")
        for b in targets
        if b.startswith("collector")
    ]
    assert leaks == []


# Standard-library names the agent may not use bare: they came in Python 3.11, and the agent
# runs on 3.10 (a Spark's OS Python may be older than the collector's).
NEWER_THAN_310 = {
    ("tomllib", None),
    ("enum", "StrEnum"),
    ("typing", "Self"),
    ("typing", "LiteralString"),
    ("typing", "Never"),
    ("datetime", "UTC"),
    ("asyncio", "TaskGroup"),
    ("asyncio", "timeout"),
}


def _guarded(tree: ast.Module) -> set[int]:
    """Line numbers inside a ``try`` that catches ImportError or an ``if`` on
    ``sys.version_info``: an import with a fallback beside it."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        caught = isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        )
        if caught or (isinstance(node, ast.If) and "version_info" in ast.unparse(node.test)):
            lines.update(
                n.lineno for stmt in node.body for n in ast.walk(stmt) if hasattr(n, "lineno")
            )
    return lines


def test_the_agent_is_python_310() -> None:
    """Its syntax parses as 3.10's, and a 3.11 standard-library name is only imported with a
    fallback beside it."""
    newer = []
    for module, path in modules("agent"):
        tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 10))
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found = [(node.module, a.name) for a in node.names] + [(node.module, None)]
            else:
                continue
            if any(f in NEWER_THAN_310 for f in found) and node.lineno not in guarded:
                newer.append(f"{module}:{node.lineno}")
    assert newer == []


@pytest.mark.parametrize("package", DOMAINS)
def test_each_package_says_its_job(package: str) -> None:
    init = ROOT / "collector" / package / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc, f"{init.relative_to(ROOT)} needs a docstring: its one job and what it may import"


SCHEMA = ROOT / "collector" / "models.py"  # one concept, however many tables


@pytest.mark.parametrize("package", ["collector", "agent"])
def test_modules_stay_small(package: str) -> None:
    """A module is one concept; past ~300 lines it is two (the schema excepted)."""
    big = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for _module, path in modules(package)
        if path != SCHEMA and (n := len(path.read_text().splitlines())) > 320
    ]
    assert big == []
