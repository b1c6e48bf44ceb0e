"""Screenshots of every page, light and dark, 1440 and 390 px wide, for a reviewer to look at
(``test-artifacts/screenshots/``); on a phone nothing is wider than the screen (issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import (
    HOST,
    PHONE,
    SIM_HOST,
    WIDE,
    LiveCollector,
    MatrixRunDone,
    RealIncident,
    login,
    screenshot,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def wider(page: Any, width: int) -> list[str]:
    """The outermost elements that stick out past ``width`` (what a phone would scroll to)."""
    return page.evaluate(
        "(w) => { const scrolls = (e) => e && e !== document.body && (['auto', 'scroll', 'hidden']"
        ".includes(getComputedStyle(e).overflowX) || scrolls(e.parentElement));"
        " return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect()"
        ".right > w + 1 && !scrolls(e.parentElement))"
        ".map(e => `${e.tagName}#${e.id}.${e.className}: ${e.textContent.slice(0, 40)}`)"
        ".slice(0, 10); }",
        width,
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1440", "390"])
def test_screenshots_of_every_page(
    browser: Any,
    live_collector: LiveCollector,
    real_incident: RealIncident,
    matrix_run: MatrixRunDone,
    scheme: str,
    viewport: dict[str, int],
) -> None:
    """Every page in light and dark, wide and phone, under test-artifacts/screenshots/ for a
    reviewer; on a phone nothing forces sideways scrolling and no hosts-board cell is cut off."""
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = context.new_page()
    pages = {
        "hosts": ("/", f'#hosts tr[data-host="{SIM_HOST}"]'),
        "host": (f"/hosts/{HOST}", ".fw-marker"),
        "freezes": ("/freezes", "#lanes .bar"),
        "incident": (f"/incidents/{real_incident.id}", "#headline"),
        "matrix": ("/matrix", "#runs td"),
        "matrix-run": (f"/matrix/{matrix_run.run_id}", "body[data-run-status]"),
        "alerts": ("/targets", "main h1"),
    }
    try:
        login(page, live_collector.base_url, "/")
        for name, (path, ready) in pages.items():
            page.goto(f"{live_collector.base_url}{path}")
            page.locator(ready).first.wait_for()
            page.wait_for_load_state("networkidle")
            screenshot(page, f"{name}-{scheme}-{viewport['width']}")
            if name == "hosts":
                right = page.evaluate(
                    "Math.max(...[...document.querySelectorAll('#hosts td')]"
                    ".map(td => td.getBoundingClientRect().right))"
                )
                assert right <= viewport["width"]
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"] + 1, (name, wider(page, viewport["width"]))
    finally:
        context.close()
