"""require(): skip locally, fail under CI=true."""

from __future__ import annotations

import pytest

from tests.support.skips import require


def test_require_passes_when_condition_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    require(True, "present")


def test_require_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no widget"):
        require(False, "no widget")


def test_require_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no widget"):
        require(False, "no widget")
