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
from collector.alerts import outbox as alerts
from collector.api import health, hosts, incidents, ingest, matrix, netconsole, webhooks
from collector.errors import AppError, AuthFailed
from collector.ingest.derive import TelemetryRegistry
from collector.liveness import heartbeat
from collector.matrix import store as matrix_runs
from collector.matrix.runner import MatrixRunner
from collector.matrix.schedule import register_matrix_schedules
from collector.netconsole.store import NetconsoleChannel
from collector.scheduler import build_scheduler
from collector.services import admin
from collector.settings import Settings
from collector.timeutil import utcnow
from collector.web import pages

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
        app.state.scheduler = None
        if settings.run_scheduler:
            app.state.scheduler = build_scheduler(
                app.state.sessionmaker, settings=settings, run_id=run_id, http_client=http_client
            )
        app.state.netconsole = None
        if settings.netconsole_bind:
            app.state.netconsole = NetconsoleChannel(
                app.state.sessionmaker,
                bind=settings.netconsole_bind,
                keep_days=settings.netconsole_keep_days,
                fragment_timeout_s=settings.netconsole_fragment_timeout_s,
                settings=settings,
            )
            app.state.netconsole.start()
        runner = start_matrix_runner(app, settings)
        if app.state.scheduler is not None:
            app.state.scheduler.start()
        try:
            yield
        finally:
            if app.state.scheduler is not None:
                app.state.scheduler.shutdown(wait=True)
            runner.shutdown()
            if app.state.netconsole is not None:
                app.state.netconsole.stop()
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
    app.state.netconsole = None
    app.state.telemetry = TelemetryRegistry(hang_stall_s=settings.vllm_hang_s)
    app.include_router(ingest.router)
    app.include_router(hosts.router)
    app.include_router(incidents.router)
    app.include_router(webhooks.router)
    app.include_router(health.router)
    app.include_router(matrix.router)
    app.include_router(matrix.presets_router)
    app.include_router(netconsole.router)
    app.include_router(pages.router)
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

    @app.exception_handler(matrix.SpecInvalid)
    async def spec_invalid(request: Request, exc: matrix.SpecInvalid) -> Response:
        return matrix.spec_invalid_response(exc)

    return app


def start_matrix_runner(app: FastAPI, settings: Settings) -> MatrixRunner:
    """The matrix runner: runs left `running` by a previous process are marked interrupted,
    queued ones resume, cron schedules are registered when the app has a scheduler."""
    factory = app.state.sessionmaker
    with db.session_scope(factory) as session:
        interrupted = matrix_runs.mark_interrupted(session)
    if interrupted:
        log.warning("matrix runs interrupted by a restart: %s", interrupted)
    runner = MatrixRunner(
        factory, data_dir=Path(settings.data_dir), settle_s=settings.matrix_settle_s
    )
    app.state.matrix_runner = runner
    runner.resume_queued()
    scheduler = getattr(app.state, "scheduler", None)
    if scheduler is not None:
        register_matrix_schedules(scheduler, factory, runner)
    return runner
