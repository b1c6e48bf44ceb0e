"""The web UI in a real headless chromium against a real collector process."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import HOST, LiveCollector, login, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

# Pages whose API has no data yet answer 404 for the item; chromium logs that as a resource
# error, which the page itself handles by saying so.
EXPECTED_404 = re.compile(r"Failed to load resource: .* 404")


def test_login_is_required_and_the_form_logs_in(page: Any, live_collector: LiveCollector) -> None:
    base = live_collector.base_url
    page.goto(f"{base}/hosts/{HOST}")
    assert urlparse(page.url).path == "/login"
    assert parse_qs(urlparse(page.url).query)["next"] == [f"/hosts/{HOST}"]
    page.fill("#token", "wrong")
    page.click("button[type=submit]")
    assert page.locator(".error").inner_text() == "Wrong token."
    page.console_errors.clear()  # the refused login is a 401 document, logged as such
    login(page, base, "/")
    row = page.locator(f'#hosts tr[data-host="{HOST}"]')  # drawn by the live refresh
    row.wait_for()
    assert "up" in row.locator(".status").inner_text()
    assert "GiB" in row.inner_text()
    assert page.console_errors == []


@pytest.mark.parametrize(
    ("name", "path", "ready"),
    [
        ("hosts", "/", f'#hosts tr[data-host="{HOST}"]'),
        ("host", f"/hosts/{HOST}", ".fw-marker"),
        ("freezes", "/freezes", "#lanes p"),
        ("incident", "/incidents/1", "#inc-summary .notice"),
        ("matrix", "/matrix", "#runs td"),
        ("matrix-run", "/matrix/1", "#run-summary .notice"),
    ],
)
def test_page_loads_without_console_errors(
    page: Any, live_collector: LiveCollector, name: str, path: str, ready: str
) -> None:
    login(page, live_collector.base_url, path)
    page.locator(ready).first.wait_for()
    page.wait_for_load_state("networkidle")
    screenshot(page, name)
    errors = [e for e in page.console_errors if not EXPECTED_404.search(e)]
    assert errors == []


def test_host_page_on_a_phone(browser: Any, live_collector: LiveCollector) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    page.locator(".fw-marker").first.wait_for()
    width = page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, "host-phone-dark")
    context.close()
    assert width <= 390 + 1  # nothing forces sideways scrolling


def test_host_chart_marks_the_kernel_event_at_its_time(
    page: Any, live_collector: LiveCollector
) -> None:
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    marker = page.locator('[data-panel="memory"] .fw-marker')
    marker.first.wait_for()
    assert marker.count() == 1
    assert float(marker.get_attribute("data-ts")) == live_collector.nvrm_ts
    assert marker.get_attribute("data-kind") == "xid"
    plotted = page.evaluate("window.fwTimeline")
    assert [m["ts"] for m in plotted["markers"]] == [live_collector.nvrm_ts]

    # Its position on the time axis: the plot area spans [since, until].
    over = page.locator('[data-panel="memory"] .u-over').bounding_box()
    box = marker.bounding_box()
    expected_x = over["x"] + over["width"] * (live_collector.nvrm_ts - plotted["since"]) / (
        plotted["until"] - plotted["since"]
    )
    assert abs(box["x"] + box["width"] / 2 - expected_x) <= 2

    marker.hover()
    tip = page.locator(".fw-tip")
    tip.wait_for()
    assert "Xid (PCI:000f:01:00): 31" in tip.inner_text()


def test_zoom_asks_for_the_selected_range(page: Any, live_collector: LiveCollector) -> None:
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    page.locator('[data-panel="memory"] .fw-marker').first.wait_for()
    page.wait_for_load_state("networkidle")
    asked: list[dict[str, float]] = []

    def on_request(request: Any) -> None:
        url = urlparse(request.url)
        if url.path.endswith(f"/hosts/{HOST}/timeline"):
            asked.append({k: float(v[0]) for k, v in parse_qs(url.query).items()})

    page.on("request", on_request)
    before = page.evaluate("window.fwTimeline")
    over = page.locator('[data-panel="psi"] .u-over').bounding_box()
    y = over["y"] + over["height"] / 2
    x0, x1 = over["x"] + over["width"] * 0.80, over["x"] + over["width"] * 0.95
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=4)
    page.mouse.move(x1, y, steps=4)
    page.mouse.up()
    page.wait_for_function("window.fwTimeline.until - window.fwTimeline.since < 3000")

    span = before["until"] - before["since"]
    want_since = before["since"] + 0.80 * span
    want_until = before["since"] + 0.95 * span
    zoomed = [a for a in asked if a["until"] - a["since"] < span / 2]
    assert zoomed, asked
    assert abs(zoomed[0]["since"] - want_since) < span * 0.01
    assert abs(zoomed[0]["until"] - want_until) < span * 0.01
    assert zoomed[0]["step"] < before["step"] or before["step"] == 1
    # Zoomed in, the live tail stops: the live tag hides.
    assert page.locator("#live-tag").is_hidden()
    screenshot(page, "host-zoomed")
    assert page.console_errors == []


def _fulfill_json(route: Any, body: Any) -> None:
    route.fulfill(status=200, content_type="application/json", body=json.dumps(body))


def test_incident_and_matrix_pages_render_the_documented_shapes(
    page: Any, live_collector: LiveCollector
) -> None:
    """The incident/matrix APIs land with their branches; the shapes the pages document render."""
    lc = live_collector
    incident = {
        "id": 7,
        "host": HOST,
        "kind": "unreachable",
        "resolution": "rebooted",
        "opened_at": lc.last_ts - 50,
        "closed_at": lc.last_ts - 10,
        "downtime_s": 40.0,
        "last_heartbeat_at": lc.nvrm_ts + 5,
        "probes": [{"at": lc.last_ts - 49, "probe": "tcp:22", "ok": False, "detail": "timeout"}],
        "artifacts": [
            {
                "id": 1,
                "name": "journal-k-b-1.txt",
                "size": 2048,
                "collected_at": lc.last_ts,
                "url": "/api/v1/incidents/7/artifacts/1",
            }
        ],
        "deliveries": [
            {
                "at": lc.last_ts - 48,
                "target": "https://hooks.example/x",
                "event": "incident.opened",
                "status": "delivered",
                "attempts": 1,
            }
        ],
    }
    run = {
        "id": 3,
        "name": "kv-sweep",
        "host": HOST,
        "status": "running",
        "progress": {"done": 1, "total": 2},
        "started_at": lc.first_ts,
        "finished_at": None,
        "profiles": [
            {
                "name": "no-mtp",
                "status": "done",
                "verdict": "fail",
                "verdict_reasons": ["xid event in window"],
                "startup": {"kv_cache_gib": 41.2},
                "workloads": [
                    {
                        "name": "toolcall",
                        "requests": 120,
                        "errors": 0,
                        "p50_ms": 800,
                        "p90_ms": 1900,
                        "p99_ms": 4100,
                        "start": lc.first_ts,
                        "end": lc.last_ts,
                    }
                ],
                "telemetry": {
                    "min_mem_available": 3 * 2**30,
                    "max_psi_full_avg10": 31.5,
                    "kernel_events": {"xid": 1},
                },
                "latency_ms": {"p50": 800, "p90": 1900, "p99": 4100, "max": 5000},
            }
        ],
    }
    page.route("**/api/v1/incidents?*", lambda r: _fulfill_json(r, {"incidents": [incident]}))
    page.route("**/api/v1/incidents/7", lambda r: _fulfill_json(r, incident))
    page.route("**/api/v1/matrix-runs/3", lambda r: _fulfill_json(r, run))
    page.route(
        "**/api/v1/matrix-runs/3/report.md",
        lambda r: r.fulfill(status=200, content_type="text/markdown", body="| profile |\n"),
    )

    login(page, lc.base_url, "/freezes")
    page.locator('#lanes .bar[data-incident="7"]').wait_for()
    assert "rebooted" in page.locator('#incidents tr[data-incident="7"]').inner_text()
    screenshot(page, "freezes-with-incident")

    page.goto(f"{lc.base_url}/incidents/7")
    page.locator('[data-panel="memory"] .fw-marker').first.wait_for()  # the Xid in the window
    assert "Downtime\n40 s" in page.locator("#inc-summary").inner_text()
    assert "tcp:22" in page.locator("#inc-probes").inner_text()
    assert page.locator("#inc-artifacts a[download]").get_attribute("href").endswith("?download=1")
    screenshot(page, "incident-with-data")

    page.goto(f"{lc.base_url}/matrix/3")
    page.locator('section.profile[data-profile="no-mtp"]').wait_for()
    assert page.locator("#run-cancel").is_visible()
    assert (
        "kv_cache_gib\n41.2" in page.locator('section.profile[data-profile="no-mtp"]').inner_text()
    )
    assert page.locator("#report").inner_text().startswith("| profile |")
    screenshot(page, "matrix-run-with-data")
    assert page.console_errors == []
