"""Skip a test for a missing component, except in CI where a missing component is a failure."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """True when running under CI (`CI=true`), where nothing may be silently skipped."""
    return os.environ.get("CI") == "true"


def require(condition: bool, reason: str) -> None:
    """Skip (locally) or fail (under `CI=true`) with `reason` unless `condition` holds."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"required component missing under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)
