"""HTML pages over the same domain functions as the JSON API; login opens a server-side
session (``collector.sessions``) named by a cookie."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

import agent
from collector import auth, origin, sessions
from collector.alerts.filters import SEVERITIES
from collector.deps import (
    AdminDep,
    LoginThrottleDep,
    NowDep,
    SessionDep,
    SettingsDep,
    TemplatesDep,
    get_templates,
)
from collector.errors import BadRequest, Forbidden
from collector.hosts import registry
from collector.hosts.listing import HostFilter, find_hosts
from collector.models import HostStatus
from collector.params import HostName, RowId, Text
from collector.readback import series
from collector.retention.usage import host_storage
from collector.settings import Settings

router = APIRouter(include_in_schema=False)
HOSTS_PAGE = 50


def wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/") and "text/html" in request.headers.get(
        "accept", ""
    )


def login_redirect(request: Request) -> Response:
    """To the login form, coming back to the page asked for with its query (a shared link's
    time range and filters)."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='/')}", status_code=303)


def not_found_page(request: Request, detail: str) -> Response:
    """A page asked for something that is not there (a mistyped host name in the address bar):
    a page saying so, with the way back, where the API gives JSON."""
    templates = get_templates(request)
    return templates.TemplateResponse(
        request, "not_found.html", {"detail": detail}, status_code=404
    )


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, templates: TemplatesDep, next: str = "/") -> Response:
    return templates.TemplateResponse(request, "login.html", {"next": next, "error": None})


@router.post("/login")
def login(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
    throttle: LoginThrottleDep,
    now: NowDep,
    token: str = Form(...),
    next: str = Form("/"),
) -> Response:
    """A right token opens a session; wrong ones from one address are slowed down
    (``collector.throttle``: 429 with Retry-After)."""
    address = request.client.host if request.client else "unknown"
    if wait := throttle.retry_after(address):
        error = f"Too many wrong tokens from {address}: try again in {wait} s."
        headers = {"Retry-After": str(wait)}
        return templates.TemplateResponse(
            request, "login.html", {"next": next, "error": error}, 429, headers
        )
    if not auth.is_admin_token(session, token=token):
        throttle.failed(address)
        return templates.TemplateResponse(
            request, "login.html", {"next": next, "error": "Wrong token."}, status_code=401
        )
    throttle.succeeded(address)
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        sessions.COOKIE_NAME,
        sessions.open_session(session, now=now),
        max_age=sessions.MAX_AGE_S,
        httponly=True,
        samesite="lax",
        secure=secure_cookie(settings),
    )
    return response


@router.post("/logout")
def logout(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """Ends the session on the server (a copy of the cookie stops working too)."""
    cookie = request.cookies.get(sessions.COOKIE_NAME)
    if cookie and (refused := origin.foreign_origin(request, settings.public_url)):
        raise Forbidden(refused)
    sessions.end_session(session, value=cookie)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        sessions.COOKIE_NAME, httponly=True, samesite="lax", secure=secure_cookie(settings)
    )
    return response


def secure_cookie(settings: Settings) -> bool:
    """The cookie only over https when the collector is reached over https."""
    return (settings.public_url or "").lower().startswith("https://")


@router.get("/", response_class=HTMLResponse)
def hosts_page(
    request: Request,
    session: SessionDep,
    templates: TemplatesDep,
    _: AdminDep,
    status: Text = None,  # the form sends "" for any
    name: Text = None,
    label: Text = None,
    page: Annotated[int, Query(ge=1, le=2**31 // HOSTS_PAGE)] = 1,
) -> Response:
    """The overview, a page of ``HOSTS_PAGE`` hosts that the filters select (a fleet is
    hundreds); its script refreshes the same page."""
    try:
        where = HostFilter.parse(statuses=[HostStatus(status)] if status else None, name=name,
                                 labels=[label] if label else None)  # fmt: skip
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    offset = (page - 1) * HOSTS_PAGE
    hosts, total = find_hosts(session, where=where, limit=HOSTS_PAGE, offset=offset)
    rows: list[dict[str, Any]] = [
        {
            "host": host,
            "sample": series.latest_sample(session, host_id=host.id),
            "outdated": registry.agent_outdated(host),
            "bundled": agent.__version__,
        }
        for host in hosts
    ]
    pager = {
        "first": offset + 1 if hosts else 0,
        "last": offset + len(hosts),
        "total": total,
        "limit": HOSTS_PAGE,
        "offset": offset,
        "prev": str(request.url.include_query_params(page=page - 1)) if page > 1 else None,
        "next": str(request.url.include_query_params(page=page + 1))
        if offset + HOSTS_PAGE < total
        else None,
    }
    filters = {"status": status or "", "name": name or "", "label": label or ""}
    context = {"rows": rows, "pager": pager, "filters": filters, "statuses": list(HostStatus)}
    return templates.TemplateResponse(request, "hosts.html", context)


@router.get("/hosts/{name}", response_class=HTMLResponse)
def host_page(
    name: HostName,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
    now: NowDep,
    _: AdminDep,
) -> Response:
    host = registry.get_host(session, name=name)
    samples = series.list_samples(session, host_id=host.id, limit=60)
    lines, _cursor = series.list_lines(
        session, host_id=host.id, source="kmsg", limit=200, newest_first=True
    )
    context = {"host": host, "samples": samples[::-1], "lines": lines}
    context |= {"outdated": registry.agent_outdated(host), "bundled": agent.__version__}
    context["storage"] = host_storage(session, host=host, settings=settings, now=now.timestamp())
    return templates.TemplateResponse(request, "host.html", context)


@router.get("/freezes", response_class=HTMLResponse)
def freezes_page(request: Request, templates: TemplatesDep, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "freezes.html", {})


@router.get("/incidents/{incident_id}", response_class=HTMLResponse)
def incident_page(
    incident_id: RowId, request: Request, templates: TemplatesDep, _: AdminDep
) -> Response:
    return templates.TemplateResponse(request, "incident.html", {"incident_id": incident_id})


@router.get("/matrix", response_class=HTMLResponse)
def matrix_page(request: Request, templates: TemplatesDep, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "matrix.html", {})


@router.get("/matrix/{run_id}", response_class=HTMLResponse)
def matrix_run_page(
    run_id: RowId, request: Request, templates: TemplatesDep, _: AdminDep
) -> Response:
    return templates.TemplateResponse(request, "matrix_run.html", {"run_id": run_id})


@router.get("/targets", response_class=HTMLResponse)
def targets_page(request: Request, templates: TemplatesDep, _: AdminDep) -> Response:
    return templates.TemplateResponse(request, "targets.html", {"severities": SEVERITIES})
