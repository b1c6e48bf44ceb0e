"""The hosts page filters a fleet by label, in a real chromium: the form, the rows the live
refresh draws, and a host's label as a link to its group."""

from __future__ import annotations

from typing import Any

import pytest

from collector import db
from collector.hosts import registry
from collector.hosts.labels import set_labels
from tests.browser.conftest import HOST, LiveCollector, login

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]  # the first test pays the fixtures


def add_hosts(lc: LiveCollector, hosts: dict[str, dict[str, str]]) -> None:
    """Register labelled hosts in the collector's database (``add-host --label`` is tested
    in tests/collector/hosts; a subprocess a host is slow here)."""
    engine = db.make_engine(lc.db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        for name, labels in hosts.items():
            host, _token = registry.create_host(session, name=name)
            set_labels(session, host=host, changes=dict(labels))
    engine.dispose()


def shown(page: Any) -> list[str]:
    return sorted(
        page.locator("#hosts tr[data-host]").evaluate_all("rs => rs.map(r => r.dataset.host)")
    )


def test_the_hosts_page_filters_by_label(page: Any, live_collector: LiveCollector) -> None:
    add_hosts(live_collector, {"lab-a-01": {"lab": "a", "rack": "7"}, "lab-a-02": {"lab": "a"},
                               "lab-b-01": {"lab": "b"}})  # fmt: skip
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
