"""A step retried on a timer that starts failing: said once, and once more when it works again."""

from __future__ import annotations

import logging


class Trouble:
    """A warning when a repeated step starts failing and a note when it works again, not one
    per try (a figures file written every second, a port polled while a server loads)."""

    def __init__(self, log: logging.Logger, failing: str, working: str) -> None:
        self.log = log
        self.texts = failing, working
        self.failing = False

    def failed(self, exc: Exception) -> None:
        if not self.failing:
            self.log.warning("%s: %s (said once until it works again)", self.texts[0], exc)
        else:
            self.log.debug("%s: %s", self.texts[0], exc)
        self.failing = True

    def passed(self) -> None:
        if self.failing:
            self.log.info("%s", self.texts[1])
        self.failing = False
