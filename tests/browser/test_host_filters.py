"""The hosts page filters a fleet by label, in a real chromium: the form, the rows the live
refresh draws, and a host's label as a link to its group."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.browser.conftest import HOST, ROOT, LiveCollector, login

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


def add_host(lc: LiveCollector, name: str, *labels: str) -> None:
    argv = [sys.executable, "-m", "collector", "--db", lc.db_url, "add-host", name]
    for label in labels:
        argv += ["--label", label]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)


def shown(page: Any) -> list[str]:
    return sorted(
        page.locator("#hosts tr[data-host]").evaluate_all("rs => rs.map(r => r.dataset.host)")
    )


def test_the_hosts_page_filters_by_label(page: Any, live_collector: LiveCollector) -> None:
    add_host(live_collector, "lab-a-01", "lab=a", "rack=7")
    add_host(live_collector, "lab-a-02", "lab=a")
    add_host(live_collector, "lab-b-01", "lab=b")
    login(page, live_collector.base_url, "/")
    page.locator(f'#hosts tr[data-host="{HOST}"]').wait_for()  # drawn by the live refresh

    page.fill("#host-filters input[name=label]", "lab=a")
    page.click("#host-filters button[type=submit]")
    page.wait_for_url("**/?*label=lab%3Da*")
    page.wait_for_function("document.getElementById('refreshed').textContent !== ''")
    assert shown(page) == ["lab-a-01", "lab-a-02"]
    assert page.inner_text("#pager").startswith("Hosts 1–2 of 2")

    page.locator('#hosts tr[data-host="lab-a-01"] a.label', has_text="rack=7").click()
    page.wait_for_url("**/?label=rack%3D7")
    page.wait_for_function("document.getElementById('refreshed').textContent !== ''")
    assert shown(page) == ["lab-a-01"]
    assert page.console_errors == []
