"""The host page as a time-series tool (issue 15): panels whose plot areas line up, markers
that lead to their line, a new host's data fitted, canary and access-log noise grey and
collapsed, the pipeline line only when canaries travel."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from agent.canary import canary_text
from agent.wire import INGEST_PATH
from tests.browser.conftest import (
    HOST,
    NVRM_TEXT,
    PHONE,
    ROOT,
    WIDE,
    LiveCollector,
    RealIncident,
    drop_connection,
    fail_first,
    login,
    sample,
    screenshot,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

PLOT_EDGES = (
    "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; })"
)


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1440", "390"])
def test_the_panels_plot_areas_line_up(
    browser: Any, live_collector: LiveCollector, real_incident: RealIncident,
    viewport: dict[str, int],
) -> None:  # fmt: skip
    """On the host page and the incident page, at 1440 and 390 px: every panel's plot area has
    the same left and right edge, so one moment is one x on all of them."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        login(page, live_collector.base_url, f"/hosts/{HOST}")
        for path in (f"/hosts/{HOST}", f"/incidents/{real_incident.id}"):
            page.goto(f"{live_collector.base_url}{path}")
            page.locator('#charts [data-panel="vllm"] .u-over').wait_for()  # all four drawn
            edges = page.locator("#charts .u-over").evaluate_all(PLOT_EDGES)
            assert len(edges) == 4, (path, edges)
            lefts, rights = {round(e[0], 1) for e in edges}, {round(e[1], 1) for e in edges}
            assert len(lefts) == 1 and len(rights) == 1, (path, edges)
            assert min(lefts) >= 0 and max(rights) <= viewport["width"]  # inside the screen
    finally:
        context.close()


def test_a_kernel_marker_click_shows_its_line(page: Any, live_collector: LiveCollector) -> None:
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    marker = page.locator('[data-panel="memory"] .fw-marker[data-kind="xid"]')
    marker.wait_for()
    line_id = marker.get_attribute("data-line-id")
    assert line_id
    marker.click()
    row = page.locator(f"#lines tr#line-{line_id}.flash")
    row.wait_for()
    assert NVRM_TEXT in row.inner_text()
    assert page.console_errors == []


def test_a_failed_first_load_is_tried_again(page: Any, live_collector: LiveCollector) -> None:
    """A connection dropped under the page's first timeline read (a collector restarting) must
    not leave the charts empty for good: the next poll draws them."""
    dropped = fail_first(page, f"**/api/v1/hosts/{HOST}/timeline?*", drop_connection)
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    page.locator('[data-panel="memory"] .fw-marker[data-kind="xid"]').wait_for()
    assert len(dropped) == 1


CANARY_HOST = "spark-canary"
NV_ERROR = "nvidia-modeset: ERROR: GPU:0: Idling display engine timed out: 0x0000c67e:0:0:1174"
ACCESS = 'INFO:     127.0.0.1:40412 - "GET /health HTTP/1.1" 200 OK'


def _new_host_with_canary(lc: LiveCollector) -> float:
    """A host registered now that sends 40 s of samples, a canary, an error and an access-log
    line; returns its first sample's time."""
    added = subprocess.run(
        [sys.executable, "-m", "collector", "add-host", CANARY_HOST],
        cwd=ROOT, env={**os.environ, "FREEZEWATCH_DB_URL": lc.db_url},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    token = added.stdout.strip().splitlines()[-1]
    now = time.time()
    first = now - 40
    line = {"source": "kmsg", "facility": 0}
    body = {
        "host": CANARY_HOST,
        "boot_id": "c4a1e7d0-2b3c-4d4e-9f8a-1b2c3d4e5f63",
        "agent": {"version": "0.1.0", "pid": 99, "started_at": first - 5},
        "samples": [sample(i + 1, first + i) for i in range(41)],
        "lines": [
            {**line, "seq": 1, "ts": now - 20, "priority": 3, "kseq": 1,
             "text": canary_text(1, now - 20.05)},
            {**line, "seq": 2, "ts": now - 10, "priority": 3, "kseq": 2, "text": NV_ERROR},
            {"seq": 3, "ts": now - 5, "source": "vllm", "priority": 6, "text": ACCESS},
        ],
        "events": [],
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    httpx.post(f"{lc.base_url}{INGEST_PATH}", json=body, headers=headers).raise_for_status()
    return first


def test_a_new_host_is_fitted_and_its_noise_is_grey_and_collapsed(
    page: Any, live_collector: LiveCollector
) -> None:
    first = _new_host_with_canary(live_collector)
    login(page, live_collector.base_url, f"/hosts/{CANARY_HOST}")
    page.locator("#lines tr.hidden-count").wait_for()
    # The default range is fitted to the minute this host has, not an hour of nothing.
    shown = page.evaluate("window.fwTimeline")
    assert shown["since"] <= first and shown["until"] - shown["since"] < 600
    assert "fitted to the host's data" in page.inner_text("#range-label")
    assert "range" not in parse_qs(urlparse(page.url).query)
    # Canaries travel: the pipeline line says how they fare.
    pipeline = page.locator("#pipeline")
    assert pipeline.is_visible() and "kmsg canary p50 " in pipeline.inner_text()
    assert "0 lost of 1" in pipeline.inner_text()

    # The canary and the access-log line are collapsed into a count; the error is red.
    hidden = page.locator("#lines tr.hidden-count")
    assert hidden.inner_text().startswith("2 vLLM access-log and canary lines hidden")
    error = page.locator("#lines tr", has_text=NV_ERROR)
    assert error.get_attribute("class") == "prio-hi kernel"
    red = error.locator("td.text").evaluate("td => getComputedStyle(td).color")
    hidden.locator("button").click()
    canary = page.locator('#lines tr[data-noise="canary"]')
    canary.wait_for()
    assert page.locator('#lines tr[data-noise="access log"]').count() == 1
    assert page.locator("#f-noise").is_checked()
    assert parse_qs(urlparse(page.url).query)["noise"] == ["1"]
    # Grey, not a red error, though it is a priority 3 kernel line.
    assert "prio-hi" not in (canary.get_attribute("class") or "")
    grey = canary.locator("td.text").evaluate("td => getComputedStyle(td).color")
    muted = page.evaluate(
        "() => { const i = document.createElement('i'); i.style.color = 'var(--muted)';"
        " document.body.append(i); const c = getComputedStyle(i).color; i.remove(); return c; }"
    )
    assert grey == muted and grey != red
    screenshot(page, "host-new-with-canary")

    # A host whose agent sends no canaries shows no pipeline line at all.
    page.goto(f"{live_collector.base_url}/hosts/{HOST}")
    page.locator(".fw-marker").first.wait_for()
    page.wait_for_load_state("networkidle")
    assert page.locator("#pipeline").is_hidden()
    assert page.console_errors == []
