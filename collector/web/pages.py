"""HTML pages over the same services as the JSON API; login sets a signed cookie."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

import templates as templates_pkg
from collector.deps import AdminDep, SessionDep
from collector.hosts import registry as host_service
from collector.readback import series as telemetry
from collector.services import admin

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(templates_pkg.__file__).resolve().parent)


def wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/") and "text/html" in request.headers.get(
        "accept", ""
    )


def _fmt_bytes(value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value / 2**30:.1f} GiB"


def _fmt_ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    delta = max(0.0, time.time() - ts)
    if delta < 120:
        return f"{delta:.0f} s ago"
    if delta < 7200:
        return f"{delta / 60:.0f} min ago"
    return f"{delta / 3600:.1f} h ago"


templates.env.filters["gib"] = _fmt_bytes
templates.env.filters["ago"] = _fmt_ago
templates.env.filters["clock"] = lambda ts: (
    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "–"
)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> Response:
    return templates.TemplateResponse(request, "login.html", {"next": next, "error": None})


@router.post("/login")
def login(
    request: Request, session: SessionDep, token: str = Form(...), next: str = Form("/")
) -> Response:
    if not admin.is_admin_token(session, token=token):
        return templates.TemplateResponse(
            request, "login.html", {"next": next, "error": "Wrong token."}, status_code=401
        )
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        admin.COOKIE_NAME,
        admin.login_cookie_value(request.app.state.cookie_secret),
        max_age=admin.COOKIE_MAX_AGE_S,
        httponly=True,
        samesite="lax",
    )
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(admin.COOKIE_NAME)
    return response


@router.get("/", response_class=HTMLResponse)
def hosts_page(request: Request, session: SessionDep, _: AdminDep) -> Response:
    rows: list[dict[str, Any]] = []
    for host in host_service.list_hosts(session):
        rows.append({"host": host, "sample": host_service.latest_sample(session, host=host)})
    return templates.TemplateResponse(request, "hosts.html", {"rows": rows})


@router.get("/hosts/{name}", response_class=HTMLResponse)
def host_page(name: str, request: Request, session: SessionDep, _: AdminDep) -> Response:
    host = host_service.get_host(session, name=name)
    samples = telemetry.list_samples(session, host_id=host.id, limit=60)
    lines, _cursor = telemetry.list_lines(
        session, host_id=host.id, source="kmsg", limit=200, newest_first=True
    )
    return templates.TemplateResponse(
        request, "host.html", {"host": host, "samples": samples[::-1], "lines": lines}
    )


@router.get("/freezes", response_class=HTMLResponse)
def freezes_page(request: Request, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "freezes.html", {})


@router.get("/incidents/{incident_id}", response_class=HTMLResponse)
def incident_page(incident_id: int, request: Request, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "incident.html", {"incident_id": incident_id})


@router.get("/matrix", response_class=HTMLResponse)
def matrix_page(request: Request, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "matrix.html", {})


@router.get("/matrix/{run_id}", response_class=HTMLResponse)
def matrix_run_page(run_id: int, request: Request, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "matrix_run.html", {"run_id": run_id})
