"""The web UI in a real headless chromium against a real collector process."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from agent.kernel.xid_catalog import xid_meaning
from tests.browser.conftest import (
    ADMIN_TOKEN,
    HOST,
    PSTORE_DMESG,
    ROOT,
    SIM_HOST,
    LiveCollector,
    MatrixRunDone,
    RealIncident,
    drop_connection,
    login,
    screenshot,
)

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
        ("freezes", "/freezes", "#lanes > *"),
        ("incident-missing", "/incidents/999999", "#inc-summary .notice"),
        ("matrix", "/matrix", "#runs td"),
        ("matrix-run-missing", "/matrix/999999", "#run-summary .notice"),
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
    # The marker comes from the classified kernel_events row of the posted NVRM Xid kmsg line
    # (a matrix run in the same session may add its stand-in's nv_err marker).
    marker = page.locator('[data-panel="memory"] .fw-marker[data-kind="xid"]')
    marker.first.wait_for()
    assert marker.count() == 1
    assert float(marker.get_attribute("data-ts")) == live_collector.nvrm_ts
    plotted = page.evaluate("window.fwTimeline")
    assert [m["ts"] for m in plotted["markers"] if m["kind"] == "xid"] == [live_collector.nvrm_ts]
    guard = [m for m in plotted["markers"] if m["kind"] == "guard"]
    assert [m["ts"] for m in guard] == [live_collector.first_ts + 540.5]
    assert "would have run docker_stop" in guard[0]["text"]

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
    assert xid_meaning(31) in tip.inner_text()  # the event's meaning, from kernel_events


def drag_across_the_xid(page: Any) -> tuple[dict[str, Any], float, float]:
    """Drag a selection over the PSI chart across the Xid marker; returns the view before and
    the selection's ends as fractions of its span."""
    before = page.evaluate("window.fwTimeline")
    span = before["until"] - before["since"]
    # The drag crosses the Xid marker (it moves left as the live window does): a marker under
    # the pointer must not cut the selection short.
    xid = next(m["ts"] for m in before["markers"] if m["kind"] == "xid")
    at = (xid - before["since"]) / span
    a, b = max(0.02, at - 0.10), min(0.98, at + 0.05)
    over = page.locator('[data-panel="psi"] .u-over').bounding_box()
    y = over["y"] + over["height"] / 2
    x0, x1 = over["x"] + over["width"] * a, over["x"] + over["width"] * b
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=4)
    page.mouse.move(x1, y, steps=4)
    page.mouse.up()
    return before, a, b


def test_zoom_asks_for_the_selected_range(page: Any, live_collector: LiveCollector) -> None:
    login(page, live_collector.base_url, f"/hosts/{HOST}?range=1h")
    page.locator('[data-panel="memory"] .fw-marker').first.wait_for()
    page.wait_for_load_state("networkidle")
    asked: list[dict[str, float]] = []

    def on_request(request: Any) -> None:
        url = urlparse(request.url)
        if url.path.endswith(f"/hosts/{HOST}/timeline"):
            asked.append({k: float(v[0]) for k, v in parse_qs(url.query).items()})

    page.on("request", on_request)
    before, a, b = drag_across_the_xid(page)
    page.wait_for_function("window.fwTimeline.until - window.fwTimeline.since < 3000")

    span = before["until"] - before["since"]
    want_since = before["since"] + a * span
    want_until = before["since"] + b * span
    zoomed = [a for a in asked if a["until"] - a["since"] < span / 2]
    assert zoomed, asked
    assert abs(zoomed[0]["since"] - want_since) < span * 0.01
    assert abs(zoomed[0]["until"] - want_until) < span * 0.01
    assert zoomed[0]["step"] < before["step"] or before["step"] == 1
    # Zoomed in, the live tail stops: the live tag hides.
    assert page.locator("#live-tag").is_hidden()
    screenshot(page, "host-zoomed")
    assert page.console_errors == []


def test_a_zoom_whose_read_is_dropped_is_asked_again(
    page: Any, live_collector: LiveCollector
) -> None:
    """A zoomed view is drawn once (no live poll follows), so a read that failed in the network
    (CI: Chromium's ERR_NETWORK_CHANGED while the two-host tests made a veth pair) must be asked
    again, not leave the charts on the old range with an uncaught error."""
    login(page, live_collector.base_url, f"/hosts/{HOST}?range=1h")
    page.locator('[data-panel="memory"] .fw-marker').first.wait_for()
    page.wait_for_load_state("networkidle")
    dropped: list[str] = []

    def drop_the_first_zoomed_read(route: Any) -> None:
        asked = {k: float(v[0]) for k, v in parse_qs(urlparse(route.request.url).query).items()}
        if not dropped and asked["until"] - asked["since"] < 3000:  # not a live poll's read
            dropped.append(route.request.url)
            drop_connection(route)
        else:
            route.continue_()

    page.route(f"**/api/v1/hosts/{HOST}/timeline?*", drop_the_first_zoomed_read)
    drag_across_the_xid(page)
    page.wait_for_function("window.fwTimeline.until - window.fwTimeline.since < 3000")
    assert len(dropped) == 1
    assert not [e for e in page.console_errors if "Failed to load resource" not in e]


def test_a_real_incident_on_the_freeze_incident_and_host_pages(
    page: Any, live_collector: LiveCollector, real_incident: RealIncident
) -> None:
    """The incident the collector's own checker opened and resolved (see ``real_incident``)."""
    lc, inc = live_collector, real_incident
    iid, detail = inc.id, inc.detail
    assert (detail["kind"], detail["resolution"]) == ("unreachable", "rebooted")

    login(page, lc.base_url, "/freezes")
    bar = page.locator(f'#lanes .bar[data-incident="{iid}"]')
    bar.wait_for()
    assert (bar.get_attribute("data-kind"), bar.get_attribute("data-resolution")) == (
        "unreachable",
        "rebooted",
    )
    row = page.locator(f'#incidents tr[data-incident="{iid}"]')
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == f"{SIM_HOST} simulated"
    assert cells[2:5] == ["unreachable", "rebooted", "xid 79"]  # the cause: the window's Xid
    assert cells[7] == duration_text(detail["downtime_s"])
    # Filters: another kind hides it, its own kind and host show it again.
    page.select_option("#f-kind", "agent_down")
    row.wait_for(state="detached")
    page.select_option("#f-kind", "unreachable")
    page.select_option("#f-host", SIM_HOST)
    row.wait_for()
    # Another host's freeze (tests of the incident page make one) leaves with the host filter.
    page.wait_for_function("document.querySelectorAll('#incidents tbody tr').length === 1")
    assert page.locator("#incidents tbody tr").get_attribute("data-incident") == str(iid)
    screenshot(page, "freezes-real-incident")

    page.goto(f"{lc.base_url}/incidents/{iid}")
    marker = page.locator('[data-panel="memory"] .fw-marker[data-kind="xid"]')
    marker.wait_for()  # the Xid 79 line 3 s before the loss, from the snapshot's window
    assert float(marker.get_attribute("data-ts")) == inc.xid_ts
    shown = page.evaluate("window.fwTimeline")
    assert shown["until"] == inc.last_sample_ts + 5 and shown["since"] == inc.last_sample_ts - 120
    summary = page.locator("#inc-summary").inner_text()
    assert "rebooted" in summary and "new boot" in summary and "simulated" in summary
    assert "GPU has fallen off the bus" in page.locator("#headline-events").inner_text()
    assert "GPU has fallen off the bus" in page.locator("#inc-lines").inner_text()
    probes = page.locator("#inc-probes tbody tr").all_inner_texts()
    assert len(probes) == 1 and probes[0].startswith("vllm\tfailed\t")
    artifacts = page.locator("#inc-artifacts").inner_text()
    assert "pstore/dmesg-ramoops-0" in artifacts
    assert page.inner_text("#postmortem-state").startswith("done: ")
    link = page.locator('#inc-artifacts tr:has-text("pstore/dmesg-ramoops-0") a[download]')
    href = link.get_attribute("href")
    assert href == f"/api/v1/incidents/{iid}/artifacts/pstore/dmesg-ramoops-0?download=1"
    got = page.request.get(f"{lc.base_url}{href}")
    assert got.text() == PSTORE_DMESG
    assert got.headers["content-disposition"].startswith("attachment;")
    deliveries = page.locator("#inc-deliveries tbody tr").all_inner_texts()
    assert [d.split("\t")[0] for d in deliveries] == ["incident.opened", "incident.resolved"]
    assert "HTTP 503" in deliveries[0] and "delivered" in deliveries[0]  # refused, then taken
    screenshot(page, "incident-real")

    page.goto(f"{lc.base_url}/hosts/{SIM_HOST}")
    span = page.locator(f'[data-panel="memory"] .fw-span.incident[data-incident="{iid}"]')
    span.wait_for()
    assert span.get_attribute("data-resolution") == "rebooted"
    plotted = page.evaluate("window.fwTimeline")
    assert plotted["until"] >= detail["end"]
    screenshot(page, "host-with-incident")

    page.goto(f"{lc.base_url}/")
    sim_row = page.locator(f'#hosts tr[data-host="{SIM_HOST}"]')
    sim_row.wait_for()
    assert "up" in sim_row.locator(".status").inner_text()  # back, no incident open
    assert "simulated" in sim_row.inner_text()
    page.wait_for_load_state("networkidle")
    assert page.console_errors == []


def duration_text(s: float) -> str:
    """fw.js ``duration`` for the short downtimes here."""
    assert s < 120
    return f"{math.floor(s + 0.5)} s"  # Math.round, not Python's round-half-even


def test_a_matrix_run_page_whose_first_read_fails_tries_again(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    """A read whose connection drops three times running (the page asks again twice at once,
    ``fw.js``) stops nothing: the page says it is trying again and the next poll shows the run
    (only a 404 ends the polling)."""
    dropped: list[str] = []

    def drop_three(route: Any) -> None:
        if len(dropped) < 3:
            dropped.append(route.request.url)
            drop_connection(route)
        else:
            route.continue_()

    page.route(f"**/api/v1/matrix-runs/{matrix_run.run_id}", drop_three)
    login(page, live_collector.base_url, f"/matrix/{matrix_run.run_id}")
    page.locator("#run-summary .notice", has_text="trying again").wait_for()
    page.locator('body[data-run-status="succeeded"]').wait_for()
    assert len(dropped) == 3
    assert "trying again" not in page.inner_text("#run-summary")  # replaced by the run


def test_matrix_run_page_shows_a_real_run(
    browser: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    assert matrix_run.run["status"] == "succeeded", matrix_run.run
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    run_id = matrix_run.run_id
    login(page, live_collector.base_url, f"/matrix/{run_id}")
    page.locator('body[data-run-status="succeeded"]').wait_for()
    page.locator(".lat-row").first.wait_for()

    x = page.locator('section.profile[data-profile="X"]')
    y = page.locator('section.profile[data-profile="Y"]')
    assert (x.get_attribute("data-verdict"), y.get_attribute("data-verdict")) == ("FAIL", "PASS")
    assert "kernel events during startup: nv_err x1" in x.locator(".reasons").inner_text()
    assert "model weights\n23.43 GiB" in x.inner_text()
    assert "drafter loaded\nyes" in x.inner_text() and "drafter loaded\nno" in y.inner_text()
    assert x.locator('tr[data-workload="tools"] td').nth(2).inner_text() == "6"  # requests
    assert page.locator("#overview tbody tr").count() == 2
    progress = page.locator("#run-progress .run-progress")
    assert progress.get_attribute("data-done") == progress.get_attribute("data-total") == "8"
    assert page.locator("#run-cancel").is_hidden()

    # One latency row per profile, a dot per request.
    rows = page.locator(".latency-plot .lat-row")
    assert [rows.nth(i).get_attribute("data-profile") for i in range(rows.count())] == ["X", "Y"]
    assert [rows.nth(i).locator("circle").count() for i in range(2)] == [6, 6]

    report = page.locator("#report").inner_text()
    assert "### Startup memory plan" in report and "| X |" in report and "FAIL" in report
    page.click("#copy-report")
    page.locator("#copy-msg", has_text="copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == page.evaluate(
        "document.getElementById('report').textContent"
    )
    screenshot(page, "matrix-run")
    context.close()
    assert errors == []


def test_the_run_page_compares_what_vllm_ran_with_next_to_the_spec(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    """The serving configuration table: vLLM's own values per profile, the spec's ask beside
    the one the host's launch script overrode; each profile's section says the same."""
    login(page, live_collector.base_url, f"/matrix/{matrix_run.run_id}")
    page.locator('body[data-run-status="succeeded"]').wait_for()
    table = page.locator("#served")
    heads = table.locator("thead th").all_inner_texts()
    assert heads == ["Profile", "TP", "PP", "Max model len", "GPU memory util.", "dtype",
                     "KV cache dtype", "Eager", "Speculative method",
                     "Speculative tokens"]  # fmt: skip
    rows = {r.get_attribute("data-profile"): r for r in table.locator("tbody tr").all()}
    assert [c.strip() for c in rows["X"].locator("td").all_inner_texts()] == [
        "X", "1", "1", "262,144", "0.6", "bfloat16", "auto", "no", "mtp", "3"]  # fmt: skip
    y = [c.strip() for c in rows["Y"].locator("td").all_inner_texts()]
    assert y == ["Y", "1", "1", "262,144", "0.6 (spec: 0.7)", "bfloat16", "fp8", "no", "–", "–"]
    flagged = table.locator(".served.mismatch")
    assert flagged.count() == 1 and flagged.get_attribute("data-key") == "gpu_memory_utilization"
    assert flagged.get_attribute("title") == "the spec asked 0.7; vLLM's log says 0.6"
    section = page.locator('section.profile[data-profile="Y"] .served-config').inner_text()
    assert "KV cache dtype\nfp8" in section and "GPU memory util.\n0.6 (spec: 0.7)" in section
    plan = page.locator('section.profile[data-profile="Y"] .profile-grid > div').nth(1)
    assert "kv_cache_dtype" not in plan.inner_text()  # not repeated under its raw name
    report = page.locator("#report").inner_text()
    assert "| Y | 1 | 1 | 262,144 | 0.6 (spec: 0.7) | bfloat16 | fp8 | no | — | — |" in report
    assert page.console_errors == []


def test_host_chart_shows_the_matrix_windows_and_the_run_kernel_event(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    login(page, live_collector.base_url, f"/hosts/{HOST}")
    page.locator('[data-panel="memory"] .fw-marker[data-kind="nv_err"]').wait_for()
    plotted = page.evaluate("window.fwTimeline")
    windows = [(m["profile"], m["kind"]) for m in plotted["matrix"]]
    assert windows == [("X", "startup"), ("X", "workload"), ("Y", "startup"), ("Y", "workload")]
    steps = {(s["profile"], s["kind"]): s for s in matrix_run.run["steps"]}
    assert plotted["matrix"][1]["start"] == steps[("X", "workload")]["started_at"]
    assert plotted["matrix"][0]["end"] == steps[("X", "health")]["ended_at"]
    assert page.locator('[data-panel="memory"] .fw-span.matrix').count() == 4
    nv_err = [m["ts"] for m in plotted["markers"] if m["kind"] == "nv_err"]
    assert nv_err == [matrix_run.kernel_ts]
    screenshot(page, "host-with-matrix")
    assert page.console_errors == []


def test_matrix_list_and_the_start_form(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    base = live_collector.base_url
    # A host without SSH settings: a preset run there is refused before anything is queued
    # (this machine's docker must not be driven by a test).
    subprocess.run(
        [sys.executable, "-m", "collector", "add-host", "no-ssh"],
        cwd=ROOT,
        env={**os.environ, "FREEZEWATCH_DB_URL": live_collector.db_url},
        capture_output=True,
        check=True,
    )
    login(page, base, "/matrix")
    row = page.locator(f'#runs tr[data-run="{matrix_run.run_id}"]')
    row.wait_for()
    assert row.get_attribute("data-status") == "succeeded"
    assert "8/8 steps" in row.inner_text()
    assert page.locator("#m-preset option").all_inner_texts() == [
        "nemoclaw-spark-isolation",
        "nemoclaw-spark-qwen",
    ]
    page.select_option("#m-preset", "nemoclaw-spark-qwen")
    assert "Profiles: A (NemoClaw managed command as shipped)" in page.inner_text("#preset-about")
    screenshot(page, "matrix")

    # The host selector marks the host without SSH and says what it needs.
    marked = page.locator('#m-host option[value="no-ssh"]')
    assert (marked.get_attribute("data-ssh"), marked.inner_text()) == ("no", "no-ssh (no SSH)")
    ready = page.locator(f'#m-host option[value="{HOST}"]')
    assert (ready.get_attribute("data-ssh"), ready.inner_text()) == ("yes", HOST)
    page.select_option("#m-host", HOST)
    help_text = page.locator("#m-host-help")
    assert (
        help_text.is_visible()
        and 'Hosts marked "no SSH" need SSH settings' in help_text.inner_text()
    )
    page.select_option("#m-host", "no-ssh")
    assert help_text.inner_text() == (
        "no-ssh has no SSH settings: a matrix run starts and stops vLLM on the host over SSH. "
        "Give it a login first: freezewatch-collector add-host no-ssh --update --ssh USER@ADDR "
        "--key PATH --trust-host-key."
    )

    page.on("dialog", lambda d: d.accept())
    page.click("#start-form button[type=submit]")
    page.locator("#start-msg", has_text="has no SSH settings").wait_for()
    assert "add-host no-ssh --update --ssh USER@ADDR --key PATH" in page.inner_text("#start-msg")
    assert page.url == f"{base}/matrix"
    # (the browser itself logs the refused request)
    assert [e for e in page.console_errors if "status of 422" not in e] == []


def test_a_failed_run_says_why_at_the_top(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone
) -> None:
    spec = {
        "name": "fails",
        "host": HOST,
        "launcher": {"type": "command"},
        "base_args": ["sh", "-c", "exit 3"],
        "profiles": {"X": {}},
        "repeat": 2,
        "startup_timeout_s": 30,
    }
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=live_collector.base_url, headers=admin) as api:
        run_id = api.post("/api/v1/matrix-runs", json={"spec": spec}).json()["id"]
    login(page, live_collector.base_url, f"/matrix/{run_id}")
    page.wait_for_function("document.body.dataset.runStatus === 'failed'", timeout=60_000)
    banner = page.locator("#run-error")
    assert banner.is_visible()
    assert banner.inner_text() == (
        "Failed: X health (wait for /health): failed: server exited (status 3); "
        "1 more failed step(s)"
    )
    # Two repetitions: the campaign table, one row per profile, k of N.
    row = page.locator('#campaign-table tr[data-profile="X"]')
    assert row.locator("td").all_inner_texts()[:3] == ["X", "2", "0/2"]
    assert row.locator("td").last.inner_text() == "2/2"  # both verdicts FAIL
    # The banner comes first, before the run's summary.
    assert page.evaluate(
        "document.getElementById('run-error').compareDocumentPosition("
        "document.getElementById('run-summary')) & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    assert (
        page.locator("#report")
        .inner_text()
        .startswith(f"## Matrix fails on {HOST} (run {run_id})\n\n**Failed:** X health")
    )
    assert page.console_errors == []


def test_cancel_button_cancels_a_running_run(
    page: Any, live_collector: LiveCollector, matrix_run: MatrixRunDone, tmp_path: Path
) -> None:
    from tests.collector.matrix.test_runner import standin_spec
    from tests.support.ports import free_port

    marker = f"fw-browser-{uuid.uuid4().hex[:12]}"
    spec = standin_spec(free_port(), marker, tmp_path / "kmsg", max_turns=1000, request_s=0.2)
    spec = {**spec, "host": HOST, "profiles": {"X": {}}}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    base = live_collector.base_url
    with httpx.Client(base_url=base, headers=admin) as api:
        run_id = api.post("/api/v1/matrix-runs", json={"spec": spec}).json()["id"]
        login(page, base, f"/matrix/{run_id}")
        page.locator('body[data-run-status="running"]').wait_for(timeout=30_000)
        page.locator("#run-cancel").wait_for()
        screenshot(page, "matrix-run-running")
        page.on("dialog", lambda d: d.accept())

        # A second run on the same host waits its turn: its empty steps table says why, and
        # again once it is cancelled before its first step.
        queued = api.post("/api/v1/matrix-runs", json={"spec": spec}).json()["id"]
        page.goto(f"{base}/matrix/{queued}")
        page.locator('body[data-run-status="queued"]').wait_for()
        empty = page.locator("#steps-empty")
        assert empty.is_visible()
        assert empty.inner_text() == (
            "No steps yet: the run is queued behind another run on this host."
        )
        page.click("#run-cancel")
        page.locator('body[data-run-status="cancelled"]').wait_for(timeout=30_000)
        assert empty.inner_text() == "No steps: the run cancelled before its first step."
        assert page.inner_text("#run-incidents-wrap") == (
            "The run never started: no window to look in."
        )

        page.goto(f"{base}/matrix/{run_id}")
        page.locator("#run-cancel").wait_for()
        page.click("#run-cancel")
        page.wait_for_function("document.body.dataset.runStatus === 'cancelled'", timeout=60_000)
        assert page.locator("#run-cancel").is_hidden()
        assert api.get(f"/api/v1/matrix-runs/{run_id}").json()["status"] == "cancelled"
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""
    assert page.console_errors == []
