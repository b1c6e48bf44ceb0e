"""The first UI: login required, cookie login works, pages render host data."""

from __future__ import annotations

from tests.collector.conftest import ADMIN_TOKEN, Collector
from tests.collector.ingest.test_batch import batch, kline, post, sample


def test_pages_need_login_and_show_hosts(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    token = c.add_host("spark-01")
    post(c, token, batch(samples=[sample(1, 42 * 2**30)], lines=[kline(1, 7, "NVRM: hello")]))
    html = {"Accept": "text/html"}
    resp = c.client.get("/", headers=html, follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"].startswith("/login")

    wrong = c.client.post("/login", data={"token": "nope", "next": "/"}, follow_redirects=False)
    assert wrong.status_code == 401
    ok = c.client.post("/login", data={"token": ADMIN_TOKEN, "next": "/"}, follow_redirects=False)
    assert ok.status_code == 303

    page = c.client.get("/", headers=html)
    assert page.status_code == 200
    assert "spark-01" in page.text and "42.0 GiB" in page.text
    host = c.client.get("/hosts/spark-01", headers=html)
    assert "NVRM: hello" in host.text

    c.client.cookies.clear()
    bearer = c.client.get("/", headers={**html, "Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert bearer.status_code == 200


def test_a_missing_host_page_is_a_page_saying_so_and_the_api_still_json(
    sqlite_collector: Collector,
) -> None:
    """A mistyped host name in the address bar: a 404 page with the way back, not raw JSON."""
    c = sqlite_collector
    html = {"Accept": "text/html", "Authorization": f"Bearer {ADMIN_TOKEN}"}
    page = c.client.get("/hosts/nope", headers=html)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert 'id="not-found"' in page.text and "nope" in page.text and 'href="/"' in page.text
    api = c.client.get("/api/v1/hosts/nope", headers=html)
    assert api.status_code == 404 and "nope" in api.json()["detail"]
