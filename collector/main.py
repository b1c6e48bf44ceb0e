"""create_app(settings): the collector's FastAPI application and its lifespan resources."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from collector import db
from collector.api import health, hosts, incidents, ingest, webhooks
from collector.errors import AppError, AuthFailed
from collector.scheduler import build_scheduler
from collector.services import admin, alerts, heartbeat
from collector.settings import Settings
from collector.timeutil import utcnow
from collector.web import incident_pages, pages

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db.migrate(settings.db_url)
        engine = db.make_engine(settings.db_url)
        app.state.engine = engine
        app.state.sessionmaker = db.make_sessionmaker(engine)
        with db.session_scope(app.state.sessionmaker) as session:
            generated = admin.ensure_admin_token(session, configured=settings.admin_token)
            app.state.cookie_secret = settings.session_secret or admin.cookie_secret(session)
        if generated:
            # Printed once: only its hash is kept.
            print(f"freezewatch: generated admin token (shown once): {generated}", flush=True)
        with db.session_scope(app.state.sessionmaker) as session:
            alerts.sync_env_targets(session, settings=settings)
        run_id = heartbeat.start_collector_run(
            app.state.sessionmaker, now=utcnow(), settings=settings
        )
        app.state.collector_run_id = run_id
        http_client = httpx.Client(follow_redirects=False)
        scheduler = None
        if settings.run_scheduler:
            scheduler = build_scheduler(
                app.state.sessionmaker, settings=settings, run_id=run_id, http_client=http_client
            )
            scheduler.start()
        try:
            yield
        finally:
            if scheduler is not None:
                scheduler.shutdown(wait=True)
            heartbeat.stop_collector_run(app.state.sessionmaker, run_id=run_id, now=utcnow())
            http_client.close()
            engine.dispose()

    app = FastAPI(
        title="freezewatch collector",
        version="0.1.0",
        lifespan=lifespan,
        description="Heartbeats, kernel lines and telemetry from GPU inference hosts.",
    )
    app.state.settings = settings
    app.include_router(ingest.router)
    app.include_router(hosts.router)
    app.include_router(incidents.router)
    app.include_router(webhooks.router)
    app.include_router(health.router)
    app.include_router(pages.router)
    app.include_router(incident_pages.router)
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.exception_handler(AppError)
    async def app_error(request: Request, exc: AppError) -> Response:
        if isinstance(exc, AuthFailed) and pages.wants_html(request):
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    @app.exception_handler(ingest.BatchInvalid)
    async def batch_invalid(request: Request, exc: ingest.BatchInvalid) -> Response:
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors[:5])
        return JSONResponse(
            {"detail": f"batch rejected, nothing stored: invalid {where}", "errors": exc.errors},
            status_code=422,
        )

    return app
