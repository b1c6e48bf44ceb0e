"""The matrix pages on a real campaign: run through the collector's runner against a simulated
host (tests.twohost.campaign_world: a real sshd and the real agent, the vLLM stand-in started
over SSH), two profiles x two repetitions, and the host frozen during Y's first workload and
reset, as the demo's campaign does (issue 15: k-of-N verdicts, the run's incidents)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import CHROMIUM, PHONE, WIDE, login, require, screenshot
from tests.twohost.campaign_world import ADMIN, campaign_world, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.sshd, pytest.mark.timeout(600)]


@dataclass
class CampaignDone:
    url: str
    run_id: int
    run: dict[str, Any]
    summary: dict[str, Any]
    froze: dict[str, Any]  # the incident of the freeze during Y #1


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CampaignDone]:
    require(Path(CHROMIUM).exists(), f"{CHROMIUM} missing (apt-get install chromium)")
    with campaign_world(tmp_path_factory.mktemp("campaign")) as w:
        run_id = w.submit(w.spec(repeat=2, soak_s=4))
        w.soaking(run_id, "Y")  # Y's first repetition is soaking: the host freezes
        w.lab.freeze()
        froze = wait_for(
            lambda: [i for i in w.incidents() if i["kind"] == "unreachable"], "the freeze"
        )[0]
        w.lab.crash_and_boot()  # the frozen host is reset by hand
        run = w.finished(run_id, timeout=300)
        assert run["status"] == "succeeded", w.failure(run)
        report = w.api(f"/api/v1/matrix-runs/{run_id}/report.json")
        # Its post-mortem settles before the pages are read (the list shows it resolved).
        wait_for(lambda: w.api(f"/api/v1/incidents/{froze['id']}")["state"] == "resolved", "back")
        yield CampaignDone(w.url, run_id, run, report["summary"], froze)


def cells(row: Any) -> list[str]:
    return [t.strip() for t in row.locator("td").all_inner_texts()]


def test_the_run_page_shows_k_of_n_per_profile_and_the_run_incidents(
    browser: Any, campaign: CampaignDone
) -> None:
    rows = {r["profile"]: r for r in campaign.summary["profiles"]}
    # What the runner made of it: the stand-in's drafter logs NV_ERR on each X start, and Y
    # froze once in two.
    assert rows["X"]["kernel_events"]["nv_err"] == {"k": 2, "n": 2}
    assert rows["Y"]["freezes"] == {"k": 1, "n": 2, "incidents": [campaign.froze["id"]]}
    iid = campaign.froze["id"]
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        login(page, campaign.url, f"/matrix/{campaign.run_id}", token=ADMIN)
        page.locator('body[data-run-status="succeeded"]').wait_for()
        table = page.locator("#campaign-table")
        assert page.locator("#campaign").is_visible()
        head = table.locator("thead th").all_inner_texts()
        assert head[:4] == ["Profile", "Cold starts", "Freezes", "nv_err"]
        assert head[-1] == "Verdict FAIL"
        x, y = (table.locator(f'tbody tr[data-profile="{p}"]') for p in "XY")
        assert cells(x)[:4] == ["X", "2", "0/2", "2/2"] and cells(x)[-1] == "2/2"
        assert cells(y)[:4] == ["Y", "2", f"1/2 #{iid}", "0/2"] and cells(y)[-1] == "1/2"
        # The freeze count links to its incident; the verdict cell says which repetitions failed.
        assert y.locator(f'td.freezes a[href="/incidents/{iid}"]').count() == 1
        assert x.locator("td.verdicts").get_attribute("data-k") == "2"
        # Y against the baseline X, in words.
        compared = page.locator("#campaign .comparisons").inner_text()
        assert "Y vs X, nv_err: 0 of 2 vs 2 of 2" in compared
        assert "Y vs X, freezes: 1 of 2 vs 0 of 2" in compared
        event = page.locator('#campaign .campaign-events li[data-event="freeze"]')
        assert f"host froze during Y: incident #{iid} (unreachable)" in event.inner_text()

        # The run's incidents: the freeze, resolved as a reboot, linked.
        listed = page.locator(f'#run-incidents li[data-incident="{iid}"]')
        assert "unreachable → rebooted" in listed.inner_text()
        listed.locator("a").click()
        page.wait_for_url(f"{campaign.url}/incidents/{iid}")
        # The incident's headline names the run and profile it interrupted.
        matrix = page.locator("#headline dd.matrix a")
        matrix.first.wait_for()
        assert f"run #{campaign.run_id} profile Y" in matrix.first.inner_text()
        assert matrix.first.get_attribute("href") == f"/matrix/{campaign.run_id}"
        screenshot(page, "incident-campaign-freeze")
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1440", "390"])
def test_screenshots_of_the_campaign_run(
    browser: Any, campaign: CampaignDone, scheme: str, viewport: dict[str, int]
) -> None:
    """For a reviewer (test-artifacts/screenshots/); on a phone nothing is wider than it."""
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = context.new_page()
    try:
        login(page, campaign.url, f"/matrix/{campaign.run_id}", token=ADMIN)
        page.locator('body[data-run-status="succeeded"]').wait_for()
        page.locator("#run-incidents li").first.wait_for()
        screenshot(page, f"matrix-campaign-{scheme}-{viewport['width']}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"] + 1
    finally:
        context.close()
