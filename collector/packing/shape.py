"""A sample's shape: its keys and nesting as a flat tuple of tokens, its leaf values as a list,
and the plan that puts the two back together into the same dict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from hashlib import blake2b
from typing import Any

# Tokens besides the keys (strings): a dict, a list, a container's end, a leaf, a null leaf
# (an agent's first sample has null rates, the next ones numbers: two shapes).
_DICT, _LIST, _END, _LEAF, _NULL = 0, 1, 2, 3, 4

Skeleton = tuple[str | int, ...]
Path = tuple[str | int, ...]
# How to rebuild one container from the leaf values: ("d", keys, kids) or ("l", n, kids); a
# kid is None for a leaf; ``kids`` is None when every kid is a leaf (then built in C).
Plan = tuple[str, Any, "tuple[Plan | None, ...] | None"]

json_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def flatten(data: Any) -> tuple[Skeleton, list[Any]]:
    """(the keys and nesting as tokens, the leaf values in document order)."""
    tokens: list[str | int] = []
    values: list[Any] = []
    _walk(data, tokens, values)
    return tuple(tokens), values


def _walk(node: Any, tokens: list[str | int], values: list[Any]) -> None:
    is_dict = type(node) is dict
    tokens.append(_DICT if is_dict else _LIST)
    for key, value in node.items() if is_dict else enumerate(node):
        if is_dict:
            tokens.append(key)
        kind = type(value)
        if kind is dict or kind is list:
            _walk(value, tokens, values)
        else:
            tokens.append(_NULL if value is None else _LEAF)
            values.append(value)
    tokens.append(_END)


def shape_digest(tokens: Skeleton, day: int) -> str:
    """A template's name in the database: its shape (``flatten``'s tokens) and the day it
    serves (a template a day keeps counters close to it)."""
    raw = json_text([day, tokens]).encode("utf-8", "surrogatepass")
    return blake2b(raw, digest_size=16).hexdigest()


def _is(token: str | int, *kinds: int) -> bool:
    return type(token) is int and token in kinds


def plan(tokens: Skeleton) -> tuple[Plan, list[Path]]:
    """How to rebuild the dict of ``tokens``, and each leaf's path (keys and list indexes)."""
    paths: list[Path] = []
    built, _ = _plan(tokens, 0, (), paths)
    return built, paths


def _plan(tokens: Skeleton, at: int, path: Path, paths: list[Path]) -> tuple[Plan, int]:
    """The plan of the container opened at ``tokens[at]``, and the index after its end."""
    is_dict = tokens[at] == _DICT
    at += 1
    keys: list[str] = []
    kids: list[Plan | None] = []
    while not _is(tokens[at], _END):
        step: str | int = len(kids)
        if is_dict:
            step = str(tokens[at])
            keys.append(step)
            at += 1
        if _is(tokens[at], _LEAF, _NULL):
            kids.append(None)
            paths.append((*path, step))
            at += 1
        else:
            kid, at = _plan(tokens, at, (*path, step), paths)
            kids.append(kid)
    flat = None if all(k is None for k in kids) else tuple(kids)
    return ("d", tuple(keys), flat) if is_dict else ("l", len(kids), flat), at + 1


def take(plan: Plan, node: Any, out: list[Any]) -> bool:
    """Append ``node``'s leaf values to ``out`` if it has the keys and lengths of ``plan``
    (False if not): ``flatten`` for data of a known shape, a container at a time."""
    kind, what, kids = plan
    if kind == "d":
        if type(node) is not dict or len(node) != len(what) or tuple(node) != what:
            return False
        if kids is None:
            out += node.values()
            return True
        items = zip(kids, node.values(), strict=True)
    else:
        if type(node) is not list or len(node) != (what if kids is None else len(kids)):
            return False
        if kids is None:
            out += node
            return True
        items = zip(kids, node, strict=True)
    for kid, value in items:
        if kid is None:
            out.append(value)
        elif not take(kid, value, out):
            return False
    return True


def build(plan: Plan, values: Iterator[Any]) -> Any:
    """The container of ``plan`` with its leaves taken from ``values`` in order."""
    kind, what, kids = plan
    if kind == "d":
        if kids is None:
            return dict(zip(what, values))  # noqa: B905 - the iterator runs on past this dict
        pairs = zip(what, kids, strict=True)
        return {k: next(values) if c is None else build(c, values) for k, c in pairs}
    if kids is None:
        return [next(values) for _ in range(what)]
    return [next(values) if c is None else build(c, values) for c in kids]
