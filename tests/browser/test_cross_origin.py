"""A page on another port of the collector's host cannot act with the admin's session: a
real Chromium, logged in to a real collector, opens a page served from a second loopback
port that posts a form to the matrix cancel route and to logout (the cookie goes along: same
site, SameSite=Lax does not stop it). Both are refused; the collector's own page still
cancels, and its logout ends the session for every copy of the cookie."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from collector import db
from collector.matrix import store
from collector.matrix.spec import validate_spec
from collector.models import MatrixRun
from collector.sessions import COOKIE_NAME
from tests.support.fleet import ADMIN, CollectorProcess, register
from tests.support.ports import free_port

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]
HOST = "spark-01"
SPEC = {
    "host": HOST,
    "launcher": {"type": "command"},
    "base_args": ["vllm", "serve", "m"],
    "profiles": {"A": {}},
}


class EvilPages:
    """Pages on their own loopback port, each posting a form to the collector at load."""

    def __init__(self, target: str) -> None:
        pages = {
            "/cancel": f"{target}/api/v1/matrix-runs/{{run}}/cancel",
            "/logout": f"{target}/logout",
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, run = self.path.partition("?run=")
                action = pages[path].format(run=run)
                body = (
                    f'<form method="post" action="{action}"></form>'
                    "<script>document.forms[0].submit()</script>"
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    register(url, [HOST])
    # No scheduler: a run queued below stays queued (nothing picks it up).
    proc = CollectorProcess(url, tmp_path / "collector.log", FREEZEWATCH_RUN_SCHEDULER="false")
    proc.start()
    yield proc
    proc.stop()


def queue_run(db_url: str) -> int:
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            return store.create_run(session, spec=validate_spec(SPEC)).id
    finally:
        engine.dispose()


def run_state(db_url: str, run_id: int) -> tuple[str, bool]:
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            run = session.scalar(select(MatrixRun).where(MatrixRun.id == run_id))
            assert run is not None
            return run.status, run.cancel_requested
    finally:
        engine.dispose()


def test_a_page_on_another_port_cannot_cancel_a_run_or_log_out(
    browser: Any, collector: CollectorProcess
) -> None:
    run_id = queue_run(collector.db_url)
    evil = EvilPages(collector.url)
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{collector.url}/login")
        page.fill("#token", ADMIN)
        page.click("button[type=submit]")
        page.wait_for_url(f"{collector.url}/")

        with page.expect_response(
            lambda r: r.url.startswith(collector.url) and r.url.endswith("/cancel")
        ) as refused:
            page.goto(f"{evil.url}/cancel?run={run_id}")
        assert refused.value.status == 403
        assert "cross-origin" in refused.value.text()
        assert run_state(collector.db_url, run_id) == ("queued", False)

        with page.expect_response(lambda r: r.url == f"{collector.url}/logout") as refused:
            page.goto(f"{evil.url}/logout")
        assert refused.value.status == 403
        page.goto(f"{collector.url}/")
        assert page.url == f"{collector.url}/"  # still logged in

        # The collector's own page: the same request goes through.
        status = page.evaluate(
            "async (id) => (await fetch(`/api/v1/matrix-runs/${id}/cancel`, "
            "{method: 'POST'})).status",
            run_id,
        )
        assert status == 200
        assert run_state(collector.db_url, run_id) == ("cancelled", True)

        [cookie] = [c["value"] for c in context.cookies() if c["name"] == COOKIE_NAME]
        page.click("form[action='/logout'] button")
        page.wait_for_url(f"{collector.url}/login")
        copied = httpx.get(f"{collector.url}/api/v1/hosts", cookies={COOKIE_NAME: cookie})
        assert copied.status_code == 401
    finally:
        context.close()
        evil.server.shutdown()
