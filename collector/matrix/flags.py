"""Flag parsing of a server command line, deliberately simple and documented.

The tokens before the first flag are the command (``vllm serve MODEL``); a flag owns the next
token as its value unless that token is itself a flag (negative numbers are values) or the flag
is written ``--flag=value``. A boolean flag followed by a positional argument would be misread,
which vLLM command lines do not do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def flag_key(flag: str) -> str:
    """Normalise a flag name for matching: vLLM accepts `_` and `-` alike."""
    return flag.split("=", 1)[0].replace("_", "-")


_NEGATIVE_NUMBER = re.compile(r"^-\d")


def is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


def split_args(argv: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Split argv into the leading command and a list of items (a flag with its value)."""
    tokens = list(argv)
    head: list[str] = []
    i = 0
    while i < len(tokens) and not is_flag(tokens[i]):
        head.append(tokens[i])
        i += 1
    items: list[list[str]] = []
    while i < len(tokens):
        token = tokens[i]
        if (
            is_flag(token)
            and "=" not in token
            and not token.startswith("--no-")
            and i + 1 < len(tokens)
            and not is_flag(tokens[i + 1])
        ):
            items.append([token, tokens[i + 1]])
            i += 2
        else:
            items.append([token])
            i += 1
    return head, items


def item_key(item: list[str]) -> str | None:
    return flag_key(item[0]) if is_flag(item[0]) else None


def flag_names(argv: Sequence[str]) -> set[str]:
    """The normalised flag names present in argv."""
    return {key for item in split_args(argv)[1] if (key := item_key(item))}


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of the first occurrence of flag, or None (also for a bare boolean flag)."""
    for item in split_args(argv)[1]:
        if item_key(item) == flag_key(flag):
            if "=" in item[0]:
                return item[0].split("=", 1)[1]
            return item[1] if len(item) > 1 else None
    return None
