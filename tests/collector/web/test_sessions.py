"""The UI's login is a server-side session bound to the admin token: logout ends it on the
server, a new admin token ends every one; its state changes must come from the collector's
own origin; its cookie is Secure behind https; wrong tokens are slowed down per address; a
weak admin token is refused at startup. Bearer tokens work as before."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from collector.cli import main
from collector.main import WeakAdminToken, create_app
from collector.sessions import COOKIE_NAME
from collector.settings import Settings
from collector.throttle import FREE_FAILURES
from tests.collector.conftest import ADMIN_TOKEN, Collector, make_collector

HTML = {"Accept": "text/html"}
OWN = {"Origin": "http://testserver"}


def log_in(client: TestClient, token: str = ADMIN_TOKEN) -> str:
    """A new session (the client's jar holds only its cookie)."""
    client.cookies.clear()
    r = client.post("/login", data={"token": token, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return r.cookies[COOKIE_NAME]


def signed_in(client: TestClient, cookie: str) -> bool:
    """Does this cookie value open the hosts page (a fresh jar: only that cookie)?"""
    client.cookies.clear()
    client.cookies.set(COOKIE_NAME, cookie)
    r = client.get("/", headers=HTML, follow_redirects=False)
    assert r.status_code in (200, 303), r.text
    return r.status_code == 200


def test_logout_ends_the_session_on_the_server(collector: Collector) -> None:
    client = collector.client
    cookie = log_in(client)
    assert signed_in(client, cookie)
    r = client.post("/logout", headers=OWN, follow_redirects=False)
    assert r.status_code == 303
    # A copy of the cookie (another tab, a stolen one) no longer works either.
    assert not signed_in(client, cookie)
    api = client.get("/api/v1/hosts")
    assert api.status_code == 401


def test_a_new_admin_token_ends_every_session(db_url: str) -> None:
    first = make_collector(db_url)
    c = next(first)
    cookie_a, cookie_b = log_in(c.client), log_in(c.client)
    next(first, None)
    # A restart with the same token keeps the sessions.
    same = make_collector(db_url)
    assert signed_in(next(same).client, cookie_a)
    next(same, None)
    rotated = ADMIN_TOKEN[::-1] + "-rotated"
    settings = Settings(db_url=db_url, admin_token=rotated, run_scheduler=False)
    with TestClient(create_app(settings)) as client:
        assert not signed_in(client, cookie_a) and not signed_in(client, cookie_b)
        assert signed_in(client, log_in(client, rotated))
        client.cookies.clear()
        old = client.get("/api/v1/hosts", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert old.status_code == 401


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"Origin": "http://testserver"}, True),
        ({"Referer": "http://testserver/matrix/1"}, True),
        ({"Origin": "http://testserver:8081"}, False),  # another port of the same host
        ({"Origin": "https://testserver"}, False),
        ({"Origin": "null"}, False),
        ({"Referer": "http://evil.example/page"}, False),
        ({}, False),
    ],
)
def test_cookie_state_changes_need_the_collectors_own_origin(
    sqlite_collector: Collector, headers: dict[str, str], allowed: bool
) -> None:
    client = sqlite_collector.client
    log_in(client)
    for method, path in [
        ("POST", "/api/v1/matrix-runs/7/cancel"),  # body-less
        ("DELETE", "/api/v1/webhooks/7"),
        ("PATCH", "/api/v1/hosts/spark-01"),
    ]:
        r = client.request(method, path, headers=headers, json={} if method == "PATCH" else None)
        # Allowed: it reaches the route (no such run/target/host); refused: 403 saying why.
        assert r.status_code == (404 if allowed else 403), (method, path, r.text)
        if not allowed:
            assert "Origin" in r.json()["detail"] or "cross-origin" in r.json()["detail"]
    # Reads need no Origin; a foreign logout is refused and leaves the session alone.
    assert client.get("/api/v1/hosts").status_code == 200
    if not allowed:
        assert client.post("/logout", headers=headers).status_code == 403
        assert client.get("/api/v1/hosts").status_code == 200


def test_bearer_requests_need_no_origin(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    r = c.client.post(
        "/api/v1/matrix-runs/7/cancel", headers={**c.admin, "Origin": "http://evil.example"}
    )
    assert r.status_code == 404, r.text


def test_the_public_url_is_an_own_origin_and_https_makes_the_cookie_secure(
    sqlite_url: str,
) -> None:
    public = "https://fw.example.org"
    for c in make_collector(sqlite_url, public_url=public):
        r = c.client.post("/login", data={"token": ADMIN_TOKEN}, follow_redirects=False)
        cookie = r.headers["set-cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "samesite=lax" in cookie.lower()
        c.client.cookies.set(COOKIE_NAME, r.cookies[COOKIE_NAME])
        behind_proxy = {"Origin": "https://fw.example.org:443"}
        assert (
            c.client.post("/api/v1/matrix-runs/7/cancel", headers=behind_proxy).status_code == 404
        )
        out = c.client.post("/logout", headers={"Referer": f"{public}/"}, follow_redirects=False)
        assert out.status_code == 303 and "Secure" in out.headers["set-cookie"]


def test_a_plain_http_collector_sets_no_secure_cookie(sqlite_collector: Collector) -> None:
    r = sqlite_collector.client.post("/login", data={"token": ADMIN_TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and "secure" not in r.headers["set-cookie"].lower()


def test_wrong_tokens_are_slowed_down_per_address(sqlite_url: str) -> None:
    now = [1_800_000_000.0]
    settings = Settings(db_url=sqlite_url, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(create_app(settings, clock=lambda: now[0])) as client:

        def attempt(token: str) -> tuple[int, str | None]:
            r = client.post("/login", data={"token": token}, follow_redirects=False)
            return r.status_code, r.headers.get("retry-after")

        assert [attempt("wrong") for _ in range(FREE_FAILURES)] == [(401, None)] * FREE_FAILURES
        assert attempt("wrong") == (429, "1")
        assert attempt(ADMIN_TOKEN) == (429, "1")  # even the right one waits
        now[0] += 1
        assert attempt("wrong") == (401, None)
        assert attempt("wrong") == (429, "2")  # each wait twice the last
        now[0] += 2
        assert attempt(ADMIN_TOKEN) == (303, None)
        assert attempt("wrong") == (401, None)  # a right token clears the address
        # Another address is not held back by this one.
        other = TestClient(client.app, client=("10.0.0.9", 50000))
        assert (
            other.post("/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code
            == 303
        )


@pytest.mark.parametrize(
    "weak", ["fwa_test-admin-token", "x" * 64, "ab" * 30, "password1234password1234"]
)
def test_a_weak_admin_token_is_refused_at_startup(
    weak: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(WeakAdminToken, match=r"secrets\.token_urlsafe"):
        create_app(Settings(db_url=sqlite_url, admin_token=weak))
    monkeypatch.setenv("FREEZEWATCH_ADMIN_TOKEN", weak)
    assert main(["serve", "--db", sqlite_url, "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "FREEZEWATCH_ADMIN_TOKEN is too weak" in err and "token_urlsafe(32)" in err


@pytest.mark.parametrize(
    "strong",
    [
        ADMIN_TOKEN,
        "fwa_" + "Zq3-Lm9_Tx2bVw8Rk4Hn7Pc1Yd6Gf0Js5Ua",  # the shape the README's command makes
        "3f9a1c7e5b2d8f4a6c0e9b7d5f3a1c8e",  # 128 bits in hex
    ],
)
def test_a_strong_admin_token_starts(strong: str, sqlite_url: str) -> None:
    settings = Settings(db_url=sqlite_url, admin_token=strong, run_scheduler=False)
    with TestClient(create_app(settings)) as client:
        r = client.get("/api/v1/hosts", headers={"Authorization": f"Bearer {strong}"})
        assert r.status_code == 200
