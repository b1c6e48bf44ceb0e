"""Reading a guard rules file: JSON, or the small part of YAML a rules file needs.

The agent has only the standard library, so YAML is read by this module: block mappings and
sequences by indentation, ``[a, b]`` and ``{k: v}`` flow collections, plain and quoted scalars
(``true``/``false``/``null``, numbers), ``#`` comments. Anything else (anchors, tags, ``|``
blocks, tabs) is an error naming the line, never a guess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


class RulesFileError(ValueError):
    """The file (or a flag's text) cannot be read as a rules document."""


_INT = re.compile(r"[-+]?\d+$")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_UNSUPPORTED = ("&", "*", "!", "|", ">", "%", "@", "`")


def load_rules_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesFileError(f"{path}: {exc.strerror or exc}") from exc
    return parse_document(text, name=str(path))


def parse_document(text: str, *, name: str = "rules") -> Any:
    """JSON when it looks like JSON (starts with ``{`` or ``[``), else the YAML subset."""
    json_error = None
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:  # maybe a one-line YAML flow: {k: v}
            json_error = exc
    try:
        lines = _lines(text, name)
        if not lines:
            return None
        value, end = _block(lines, 0, lines[0][1], name)
        if end < len(lines):
            raise RulesFileError(f"{name}: line {lines[end][0]}: unexpected indentation")
    except RulesFileError:
        if json_error is not None:
            raise RulesFileError(f"{name}: line {json_error.lineno}: {json_error.msg}") from None
        raise
    return value


def _lines(text: str, name: str) -> list[tuple[int, int, str]]:
    """(line number, indent, content without comment) of each line that says something."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise RulesFileError(f"{name}: line {number}: tabs cannot indent YAML")
        content = _strip_comment(raw).rstrip()
        if content.strip() in ("", "---"):
            continue
        out.append((number, len(content) - len(content.lstrip()), content.strip()))
    return out


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _split_key(content: str) -> tuple[str, str] | None:
    """``key: rest`` → (key, rest); None when the content is not a mapping entry."""
    if content[:1] in "\"'":
        parser = _Flow(content, 0, "")
        try:
            key = parser.quoted()
        except RulesFileError:
            return None
        rest = content[parser.pos :]
        if not (rest == ":" or rest.startswith(": ")):
            return None
        return key, rest[1:].lstrip()
    if content[:1] in "[{":
        return None
    m = re.match(r"([^:#]+?)\s*:(?:\s+|$)", content)
    if m is None:
        return None
    return m.group(1).strip(), content[m.end() :]


def _block(lines: list[tuple[int, int, str]], i: int, indent: int, name: str) -> tuple[Any, int]:
    if _is_item(lines[i][2]):
        return _sequence(lines, i, indent, name)
    if _split_key(lines[i][2]) is not None:
        return _mapping(lines, i, indent, name)
    value = _scalar_or_flow(lines[i][2], lines[i][0], name)
    return value, i + 1


def _nested(
    lines: list[tuple[int, int, str]], i: int, indent: int, name: str, *, allow_same: bool
) -> tuple[Any, int]:
    """The block under a ``key:`` or ``-`` with nothing after it (null if there is none)."""
    if i < len(lines):
        deeper = lines[i][1] > indent
        if deeper or (allow_same and lines[i][1] == indent and _is_item(lines[i][2])):
            return _block(lines, i, lines[i][1], name)
    return None, i


def _sequence(
    lines: list[tuple[int, int, str]], i: int, indent: int, name: str
) -> tuple[list[Any], int]:
    items: list[Any] = []
    while i < len(lines) and lines[i][1] == indent and _is_item(lines[i][2]):
        number, _, content = lines[i]
        rest = content[1:].lstrip()
        if not rest:
            value, i = _nested(lines, i + 1, indent, name, allow_same=False)
        elif _split_key(rest) is not None:
            column = indent + len(content) - len(rest)
            lines = [*lines[:i], (number, column, rest), *lines[i + 1 :]]
            value, i = _mapping(lines, i, column, name)
        else:
            value, i = _scalar_or_flow(rest, number, name), i + 1
        items.append(value)
    return items, i


def _mapping(
    lines: list[tuple[int, int, str]], i: int, indent: int, name: str
) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while i < len(lines) and lines[i][1] == indent and not _is_item(lines[i][2]):
        number, _, content = lines[i]
        entry = _split_key(content)
        if entry is None:
            raise RulesFileError(f"{name}: line {number}: expected 'key: value'")
        key, rest = entry
        if key in out:
            raise RulesFileError(f"{name}: line {number}: {key!r} given twice")
        if rest:
            out[key], i = _scalar_or_flow(rest, number, name), i + 1
        else:
            out[key], i = _nested(lines, i + 1, indent, name, allow_same=True)
    if i < len(lines) and lines[i][1] > indent:
        raise RulesFileError(f"{name}: line {lines[i][0]}: unexpected indentation")
    return out, i


def _scalar_or_flow(text: str, number: int, name: str) -> Any:
    if text[:1] in _UNSUPPORTED:
        raise RulesFileError(f"{name}: line {number}: {text[:1]!r} is YAML this reader lacks")
    if text[:1] not in "[{":
        return _scalar(text, number, name)
    parser = _Flow(text, number, name)
    value = parser.value()
    parser.skip()
    if parser.pos != len(text):
        parser.fail("text after the closing bracket")
    return value


def _scalar(text: str, number: int, name: str) -> Any:
    if text[:1] in "'\"":
        parser = _Flow(text, number, name)
        value = parser.quoted()
        if parser.pos != len(text):
            parser.fail("text after the closing quote")
        return value
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "~"):
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


class _Flow:
    """``[...]`` / ``{...}`` with plain or quoted scalars inside, on one line."""

    def __init__(self, text: str, number: int, name: str) -> None:
        self.text, self.pos, self.number, self.name = text, 0, number, name

    def fail(self, why: str) -> None:
        raise RulesFileError(f"{self.name}: line {self.number}: {why}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def value(self) -> Any:
        self.skip()
        ch = self.text[self.pos : self.pos + 1]
        if ch == "[":
            return self.collection("]", self.value)
        if ch == "{":
            return dict(self.collection("}", self.pair))
        if ch in ("'", '"'):
            return self.quoted()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",]}":
            if self.text[self.pos] == ":" and self.text[self.pos + 1 : self.pos + 2] in ("", " "):
                break  # the end of a {key: ...}; "http://x" stays one scalar
            self.pos += 1
        raw = self.text[start : self.pos].strip()
        if not raw:
            self.fail("a value is missing")
        return _scalar(raw, self.number, self.name)

    def pair(self) -> tuple[str, Any]:
        key = self.value()
        self.skip()
        if not self.text.startswith(":", self.pos):
            self.fail("expected ':' in a {mapping}")
        self.pos += 1
        return str(key), self.value()

    def collection(self, close: str, item: Any) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        self.skip()
        if self.text.startswith(close, self.pos):
            self.pos += 1
            return items
        while True:
            items.append(item())
            self.skip()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == close:
                return items
            if ch != ",":
                self.fail(f"expected ',' or '{close}'")

    def quoted(self) -> str:
        quote = self.text[self.pos]
        end = self.pos + 1
        out = []
        while end < len(self.text):
            ch = self.text[end]
            if quote == "'" and ch == "'" and self.text.startswith("''", end):
                out.append("'")
                end += 2
                continue
            if ch == quote:
                self.pos = end + 1
                return "".join(out)
            if quote == '"' and ch == "\\" and end + 1 < len(self.text):
                nxt = self.text[end + 1]
                out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
                end += 2
                continue
            out.append(ch)
            end += 1
        self.fail("unterminated quote")
        raise AssertionError("unreachable")
