"""The alert targets page in a real chromium: add an Apprise target, test it, delete it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import LiveCollector, login, screenshot
from tests.support.http_receiver import http_receiver

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


def test_add_test_and_delete_an_apprise_target(page: Any, live_collector: LiveCollector) -> None:
    with http_receiver() as rec:
        login(page, live_collector.base_url, "/targets")
        page.locator("#targets td").first.wait_for()
        page.select_option("#t-format", "apprise")
        page.fill("#t-url", f"json://fw:hunter2@127.0.0.1:{rec.port}/notify")
        page.fill("#t-events", "incident.*")
        page.select_option("#t-severity", "error")
        page.click("#add-form button[type=submit]")
        row = page.locator('#targets tr[data-format="apprise"]').last
        row.wait_for()
        text = row.inner_text()
        assert "incident.*" in text and "error" in text
        assert "hunter2" not in page.content()  # the credentials are write-only

        row.locator("button.test").click()
        row.locator(".test-ok").wait_for()
        [got] = rec.accepted
        assert got.path == "/notify" and got.body["title"].startswith("[TEST] ")
        screenshot(page, "targets")

        page.on("dialog", lambda d: d.accept())
        target_id = row.get_attribute("data-target")
        row.locator("button.delete").click()
        page.locator(f'#targets tr[data-target="{target_id}"]').wait_for(state="detached")
    assert page.console_errors == []
