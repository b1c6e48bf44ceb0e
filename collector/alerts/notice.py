"""A readable alert for people (chat, push, e-mail): a title, a few lines, a level.

Built by whoever builds the event's payload (incidents, kernel); the outbox stores it as the
body of Apprise targets. ``level`` is an Apprise notify type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LEVELS = ("info", "success", "warning", "failure")


@dataclass(frozen=True)
class Notice:
    title: str
    body: str
    level: str = "failure"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"notice level must be one of {LEVELS}, not {self.level!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "body": self.body, "level": self.level}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Notice:
        return cls(title=str(data["title"]), body=str(data["body"]), level=str(data["level"]))


def lines(*parts: str | None) -> str:
    """The body: the given lines, empty ones left out."""
    return "\n".join(p for p in parts if p)
