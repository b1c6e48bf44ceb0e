"""The incident page's verdict and evidence on the incident the collector's own checker opened
(``real_incident``) and on a simulated freeze without SSH (issue 15): what the headline names
and where each item leads, the access-log noise collapsed, artifacts that say why they are
empty or failed, the verdict in a phone's first screen."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import (
    EMPTY_PSTORE,
    PHONE,
    XID_79,
    LiveCollector,
    RealIncident,
    fail_first,
    login,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]
GIB = 2**30


def test_the_headline_names_what_happened_and_links_to_it(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    detail = real_incident.detail
    login(page, live_collector.base_url, f"/incidents/{real_incident.id}")
    page.locator("#headline-events").wait_for()
    # The Xid with its meaning, severity and recommended action, as the collector graded it.
    (xid,) = [e for e in detail["kernel_events"] if e["kind"] == "xid"]
    assert xid["meaning"] and xid["severity"] and xid["action"] not in (None, "none")
    item = page.locator('#headline-events li[data-kind="xid"]')
    assert item.locator(".meaning").inner_text() == xid["meaning"]
    assert item.locator(".severity").inner_text() == xid["severity"]
    assert item.locator(".action").inner_text() == f"action: {xid['action'].replace('_', ' ')}"

    # Before the loss: the lowest MemAvailable of the kept samples, a link to it on the charts.
    samples = detail["snapshot"]["samples"]
    low = min(samples, key=lambda s: s["mem_available"])
    link = page.locator("#headline dd.before-loss a.evidence-link").first
    assert link.inner_text() == f"{low['mem_available'] / GIB:.1f} GiB"
    assert "highest PSI memory full" in page.inner_text("#headline dd.before-loss")
    link.click()
    focus = page.locator('#charts [data-panel="memory"] .fw-focus')
    focus.wait_for()
    over = page.locator('#charts [data-panel="memory"] .u-over').bounding_box()
    shown = page.evaluate("window.fwTimeline")
    at = over["x"] + over["width"] * (low["ts"] - shown["since"]) / (
        shown["until"] - shown["since"]
    )
    box = focus.bounding_box()
    assert abs(box["x"] - at) <= 2
    # vLLM's state from the last sample, and the last kernel line before the loss.
    assert "health ok, 4 running / " in page.inner_text("#headline dd.vllm")
    last = page.locator("#headline dd.last-kernel")
    assert XID_79 in last.inner_text()
    last.locator("a.evidence-link").click()
    assert XID_79 in page.locator("#inc-lines tr.flash").inner_text()

    # The vLLM access-log line is collapsed into a count until asked for.
    hidden = page.locator("#inc-lines tr.hidden-count", has_text="access-log")
    assert hidden.inner_text().startswith("1 vLLM access-log and canary lines collapsed")
    assert page.locator('#inc-lines tr[data-noise="access log"]').count() == 0
    hidden.locator("button").click()
    access = page.locator('#inc-lines tr[data-noise="access log"]')
    access.wait_for()
    assert "POST /v1/completions" in access.inner_text()
    # The host page's filters narrow the two lines: by text, then by source.
    count = "document.querySelectorAll('#inc-lines tbody tr[data-ts]').length"
    assert page.evaluate(count) == 2
    page.fill("#f-text", "fallen off")
    page.wait_for_function(f"{count} === 1")
    assert XID_79 in page.locator("#inc-lines tbody tr[data-ts]").inner_text()
    page.fill("#f-text", "")
    page.select_option("#f-source", "journal")
    page.wait_for_function(f"{count} === 1")
    assert page.locator("#inc-lines tbody tr[data-ts]").get_attribute("data-noise") == "access log"
    assert page.console_errors == []


def test_a_failed_first_read_says_so_and_is_tried_again(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    """The collector answering 503 to the page's first read (its database away) shows why and
    keeps polling: the verdict appears once the read works, without a reload."""
    refused = fail_first(
        page,
        f"**/api/v1/incidents/{real_incident.id}",
        lambda route: route.fulfill(status=503, json={"detail": "database unavailable"}),
    )
    login(page, live_collector.base_url, f"/incidents/{real_incident.id}")
    page.locator("#inc-summary .notice", has_text="database unavailable: trying again").wait_for()
    page.locator("#headline-events").wait_for()
    assert len(refused) == 1
    assert page.locator('#headline[data-state="resolved"]').count() == 1


def test_an_empty_artifact_says_why(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    login(page, live_collector.base_url, f"/incidents/{real_incident.id}")
    name = f"pstore/{EMPTY_PSTORE}"
    why = page.locator(f'#inc-artifacts tr.artifact-why[data-artifact="{name}"]')
    why.wait_for()
    assert why.inner_text() == (
        "Empty: the command printed nothing; a freeze without a panic leaves pstore empty."
    )
    # Nothing to view or download; a file with text has no such row.
    assert page.locator(f'#inc-artifacts tr[data-artifact="{name}"] a').count() == 0
    full = '#inc-artifacts tr.artifact-why[data-artifact="pstore/dmesg-ramoops-0"]'
    assert page.locator(full).count() == 0
    # Every artifact the API reports as empty or failed has its reason on the page.
    for a in real_incident.detail["artifacts"]:
        failed = a["error"] or a["exit_status"] not in (0, None) or not a["size"]
        row = page.locator(f'#inc-artifacts tr.artifact-why[data-artifact="{a["name"]}"]')
        assert row.count() == (1 if failed else 0), a
    assert page.console_errors == []


def test_the_verdict_is_in_a_phones_first_screen(
    browser: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    try:
        login(page, live_collector.base_url, f"/incidents/{real_incident.id}")
        first = page.locator("#headline-events li").first
        first.wait_for()
        top = first.evaluate("e => e.getBoundingClientRect().top")
        assert page.evaluate("window.scrollY") == 0
        assert 0 <= top < PHONE["height"]
        assert "GPU has fallen off the bus" in first.inner_text()
        assert page.locator("#headline .verdict").bounding_box()["y"] < top
    finally:
        context.close()
