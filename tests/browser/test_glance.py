"""Each page answers its question in the first screen, in a real chromium (issue 15)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import (
    HOST,
    LOCKUP,
    PSTORE_DMESG,
    SIM_HOST,
    WIDE,
    LiveCollector,
    RealIncident,
    SimFreeze,
    login,
    screenshot,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def iso(ts: float) -> str:
    """What the host page writes into ``?from=`` (JavaScript's ``toISOString``)."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def in_first_viewport(page: Any, selector: str) -> bool:
    """Is the element's top inside the viewport without scrolling?"""
    box = page.evaluate(
        "(s) => { const r = document.querySelector(s).getBoundingClientRect();"
        " return [r.top, r.bottom, window.innerHeight, window.scrollY]; }",
        selector,
    )
    top, _bottom, height, scrolled = box
    return scrolled == 0 and 0 <= top < height


def test_an_open_freeze_headline_names_the_soft_lockup_and_turns_resolved_live(
    page: Any, sim_freeze: SimFreeze
) -> None:
    """A simulated Spark (real agent) logs a soft lockup and freezes: the incident page, opened
    while the host is still silent, names the lockup first and follows the return live."""
    page.set_viewport_size(WIDE)
    login(page, sim_freeze.lc.base_url, f"/incidents/{sim_freeze.id}")
    events = page.locator("#headline-events")
    events.wait_for()
    assert page.locator("#headline").get_attribute("data-state") == "open"
    first = page.locator("#headline-events li").first
    assert first.get_attribute("data-kind") == "soft_lockup"
    assert LOCKUP in first.inner_text()
    assert in_first_viewport(page, "#headline-events li")
    assert page.inner_text("#postmortem-state").startswith("waiting for the host")
    assert "silent for" in page.inner_text("#headline .verdict")
    # The downtime counts while the page is open.
    page.wait_for_function(
        "(t) => document.getElementById('downtime').textContent !== t",
        arg=page.inner_text("#downtime"),
    )
    # The evidence: newest first, kernel lines and errors by default, the lockup among them.
    lines = page.locator("#inc-lines tbody tr[data-ts]")
    stamps = [float(t) for t in lines.evaluate_all("rows => rows.map(r => r.dataset.ts)")]
    assert stamps == sorted(stamps, reverse=True) and stamps
    assert LOCKUP in page.inner_text("#inc-lines")
    # Its link lands on the line in the evidence below.
    first.locator("a.evidence-link").click()
    page.locator("#inc-lines tr.flash").wait_for()
    assert LOCKUP in page.locator("#inc-lines tr.flash").inner_text()
    screenshot(page, "incident-open-soft-lockup")

    detail = sim_freeze.resolved()  # the host reboots; the page is not reloaded
    page.wait_for_function("document.body.dataset.incidentState === 'resolved'", timeout=60_000)
    page.locator('#headline[data-state="resolved"]').wait_for(timeout=30_000)
    verdict = page.inner_text("#headline .verdict")
    assert "rebooted" in verdict and verdict.startswith("unreachable")
    assert "down " in verdict and page.locator("#inc-live").count() == 0
    page.wait_for_function(
        "!document.getElementById('postmortem-state').textContent.startsWith('waiting')"
    )
    assert detail["resolution"] == "rebooted"
    # This host has no SSH: the post-mortem failed, and the page says why and what would help.
    page.wait_for_function(
        "document.getElementById('postmortem-state').textContent.startsWith('failed')"
    )
    why = page.locator('#inc-artifacts tr.artifact-why[data-artifact="postmortem-error"]')
    assert why.inner_text() == (
        "The post-mortem could not run: no SSH configured. Give the host SSH settings "
        "(freezewatch-collector add-host NAME --ssh USER@ADDR --key PATH --trust-host-key) "
        "for the next freeze."
    )
    screenshot(page, "incident-resolved-soft-lockup")
    assert page.console_errors == []


def test_the_host_view_round_trips_through_the_url(
    page: Any, live_collector: LiveCollector
) -> None:
    base = live_collector.base_url
    login(page, base, f"/hosts/{HOST}?range=24h&source=kmsg")
    page.locator('[data-panel="memory"] .fw-marker').first.wait_for()
    assert page.locator('#ranges button[data-span="86400"]').get_attribute("class") == "active"
    assert page.input_value("#f-source") == "kmsg"

    # An absolute range from the picker goes into the URL, survives a reload, and Back undoes it.
    since = math.floor(live_collector.nvrm_ts) - 120  # the picker writes whole seconds
    until = since + 180
    page.fill("#range-from", page.evaluate(f"window.FW.inputValue({since})"))
    page.fill("#range-to", page.evaluate(f"window.FW.inputValue({until})"))
    page.click("#range-form button[type=submit]")
    page.wait_for_function(f"window.fwTimeline.since === {since}")
    q = parse_qs(urlparse(page.url).query)
    assert "range" not in q and q["source"] == ["kmsg"] and q["from"] and q["to"]
    page.reload()
    page.wait_for_function(f"window.fwTimeline.since === {since}")
    assert page.evaluate("window.fwTimeline.until") == until
    assert page.input_value("#f-source") == "kmsg"
    page.go_back()
    page.wait_for_function("window.fwTimeline.until - window.fwTimeline.since > 80000")
    assert parse_qs(urlparse(page.url).query)["range"] == ["24h"]

    # A double-click zooms out of a drag-zoom.
    page.goto(f"{base}/hosts/{HOST}?from={iso(since)}&to={iso(until)}")
    page.wait_for_function(f"window.fwTimeline.since === {since}")
    over = page.locator('[data-panel="psi"] .u-over').bounding_box()
    page.mouse.dblclick(over["x"] + over["width"] / 2, over["y"] + over["height"] / 2)
    page.wait_for_function(f"window.fwTimeline.until - window.fwTimeline.since > {until - since}")
    assert page.console_errors == []


def test_a_click_on_an_incident_span_opens_the_incident(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    iid, detail = real_incident.id, real_incident.detail
    login(page, live_collector.base_url, f"/hosts/{SIM_HOST}")
    span = page.locator(f'[data-panel="memory"] .fw-span.incident[data-incident="{iid}"]')
    span.wait_for()
    # The host's incidents beside the charts link to the same incident.
    assert page.locator(f'#incident-list a[href="/incidents/{iid}"]').count() >= 1
    # The span's middle, on the plot (spans let clicks through to it).
    box = span.bounding_box()
    assert box is not None and detail["end"] is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(f"{live_collector.base_url}/incidents/{iid}")
    page.locator("#headline").wait_for()
    assert page.console_errors == []


def test_the_hosts_board_tells_a_host_that_froze_from_one_that_never_did(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    iid = real_incident.id
    login(page, live_collector.base_url, "/")
    froze = page.locator(f'#hosts tr[data-host="{SIM_HOST}"]')
    froze.wait_for()
    assert froze.get_attribute("class") == "recent-freeze"
    last = froze.locator(".last-freeze").inner_text()
    assert last.startswith("last freeze ") and f"(#{iid} rebooted)" in last
    assert froze.locator(f'.avail a.freeze[data-incident="{iid}"]').count() == 1
    assert "1 freeze in 24 h" in froze.locator(".freeze-count").inner_text()
    never = page.locator(f'#hosts tr[data-host="{HOST}"]')
    assert never.get_attribute("class") is None
    assert never.locator(".last-freeze").inner_text() == "never froze"
    assert never.locator("svg.spark path").count() == 1  # its MemAvailable sparkline
    # The freeze mark is a link to the incident, with a hover card.
    froze.locator(f'.avail a.freeze[data-incident="{iid}"]').hover()
    assert f"#{iid}" in page.locator(".fw-tip").inner_text()
    # The current vLLM state (led by its phase, "stopped", once the session's matrix run has
    # run on this host); a host without vLLM says so.
    vllm = never.locator('td[data-label="vLLM"]').inner_text()
    assert re.fullmatch(r"(stopped · )?health ok · 4 run / \d+ wait", vllm), vllm
    # The 7 d strip, remembered by this browser.
    page.click('#board-ranges button[data-range="7d"]')
    froze.locator('.avail[data-range="7d"]').wait_for()
    assert froze.locator(f'.avail a.freeze[data-incident="{iid}"]').count() == 1
    assert "last 7d" in froze.locator(".avail-meta").inner_text()
    page.reload()
    page.locator(f'#hosts tr[data-host="{SIM_HOST}"] .avail[data-range="7d"]').wait_for()
    assert page.get_attribute('#board-ranges button[data-range="7d"]', "class") == "active"
    assert page.console_errors == []


def test_the_freezes_page_names_the_cause_and_only_the_kinds_present(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    login(page, live_collector.base_url, "/freezes")
    row = page.locator(f'#incidents tr[data-incident="{real_incident.id}"]')
    row.wait_for()
    assert row.locator("td.cause").inner_text() == "xid 79"
    shown = {i["kind"] for i in page.evaluate("[...document.querySelectorAll('#lanes .bar')]"
                                               ".map(b => ({kind: b.dataset.kind}))")}  # fmt: skip
    legend = page.locator("#incident-legend [data-legend]").evaluate_all(
        "items => items.map(i => i.dataset.legend)"
    )
    assert shown <= set(legend) and "paused" not in legend
    # A hover card, not the native title.
    bar = page.locator(f'#lanes .bar[data-incident="{real_incident.id}"]')
    assert bar.get_attribute("title") is None
    bar.hover()
    card = page.locator(".fw-tip").inner_text()
    assert "xid 79" in card and "down" in card
    # The range lives in the URL.
    page.select_option("#f-range", "24h")
    assert parse_qs(urlparse(page.url).query)["range"] == ["24h"]
    page.reload()
    assert page.input_value("#f-range") == "24h"
    assert page.console_errors == []


def test_an_empty_range_says_so_and_legend_values_have_units_only_near_a_point(
    page: Any, live_collector: LiveCollector
) -> None:
    lc = live_collector
    before = math.floor(lc.first_ts) - 7200
    login(page, lc.base_url, f"/hosts/{HOST}?from={iso(before)}&to={iso(before + 3600)}")
    box = page.locator("#no-data")
    box.wait_for()
    assert box.inner_text().startswith("No data in this range. The latest sample is from ")
    box.locator("button").click()  # "show the hour before it": the latest sample's hour
    box.wait_for(state="hidden")
    shown = page.evaluate("window.fwTimeline")
    assert shown["until"] >= lc.last_ts and not all(shown["empty"])

    # The hour before the latest sample holds ten minutes of data, at its end.
    over = page.locator('[data-panel="memory"] .u-over').bounding_box()
    y = over["y"] + over["height"] / 2
    values = page.locator('[data-panel="memory"] .u-legend .u-value')
    page.mouse.move(over["x"] + over["width"] * 0.1, y)  # no point near: no value
    assert values.nth(1).inner_text() == "–"
    first_x = (lc.first_ts + 120 - shown["since"]) / (shown["until"] - shown["since"])
    page.mouse.move(over["x"] + over["width"] * first_x, y)
    assert values.nth(1).inner_text().endswith(" GiB")
    assert page.console_errors == []


def test_the_time_zone_switch_is_shown_and_remembered(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    login(page, live_collector.base_url, "/freezes")
    page.locator("#lanes .bar").first.wait_for()
    toggle = page.locator("#tz-toggle")
    if toggle.get_attribute("data-tz") == "utc":  # the browser's default is its own zone
        toggle.click()
        page.locator('#tz-toggle[data-tz="local"]').wait_for()
    toggle.click()  # to UTC: the page reloads in it
    page.locator('#tz-toggle[data-tz="utc"]').wait_for()
    assert page.inner_text("#tz-toggle") == "Times: UTC"
    # Another page of the same browser keeps it, and its times are 24 h UTC.
    page.goto(f"{live_collector.base_url}/incidents/{real_incident.id}")
    page.locator("#headline").wait_for()
    assert page.inner_text("#tz-toggle") == "Times: UTC"
    start = datetime.fromtimestamp(real_incident.detail["start"], UTC).strftime("%H:%M:%S")
    assert f"{start} UTC" in page.inner_text("#headline .verdict")
    assert page.inner_text("#inc-lines thead th >> nth=0") == "Time (UTC)"


def test_an_artifact_reads_inline_with_line_numbers(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    login(page, live_collector.base_url, f"/incidents/{real_incident.id}")
    row = page.locator('#inc-artifacts tr[data-artifact="pstore/dmesg-ramoops-0"]').first
    row.locator("a.view").click()
    text = page.locator('tr.artifact-text[data-artifact="pstore/dmesg-ramoops-0"] pre.numbered')
    text.wait_for()
    numbered = text.locator(".ln").evaluate_all("spans => spans.map(s => s.dataset.n)")
    assert numbered == [str(n + 1) for n in range(len(PSTORE_DMESG.splitlines()))]
    assert text.inner_text().strip() == PSTORE_DMESG.strip()
    assert page.console_errors == []


def contrast(a: list[int], b: list[int]) -> float:
    """WCAG contrast ratio of two sRGB colours."""

    def lum(c: list[int]) -> float:
        lin = [
            v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
            for v in (x / 255 for x in c)
        ]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


PALETTE = """() => {
  const probe = document.createElement("i");
  document.body.append(probe);
  const rgb = (css) => {
    probe.style.color = css;
    return getComputedStyle(probe).color.match(/\\d+/g).slice(0, 3).map(Number);
  };
  const out = {};
  for (const [k, v] of Object.entries(window.FW.INCIDENT_COLORS)) out[k] = rgb(v);
  out["(panel)"] = rgb(getComputedStyle(document.getElementById("lanes")).backgroundColor);
  probe.remove();
  return out;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_incident_colours_stay_visible_in_both_schemes(
    browser: Any, live_collector: LiveCollector, real_incident: RealIncident, scheme: str
) -> None:
    """Every kind and resolution colour of the freezes page stands out from its panel by at
    least 3:1 (WCAG's contrast for graphics), in light and in dark mode."""
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    try:
        login(page, live_collector.base_url, "/freezes")
        page.locator("#lanes .bar").first.wait_for()
        colours = page.evaluate(PALETTE)
    finally:
        context.close()
    panel = colours.pop("(panel)")
    assert "unreachable" in colours and len(colours) >= 10
    faint = {k: round(contrast(c, panel), 2) for k, c in colours.items() if contrast(c, panel) < 3}
    assert faint == {}
