"""create_app(settings): the collector's FastAPI application and its lifespan resources."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import OperationalError

from collector import auth, db
from collector.alerts.targets import sync_env_targets
from collector.api import (
    deploy,
    health,
    host_records,
    hosts,
    incidents,
    ingest,
    matrix,
    netconsole,
    webhooks,
)
from collector.api.openapi_doc import ERROR_RESPONSES, document_ingest_body, errors_as_json
from collector.errors import AppError, AuthFailed, NotFound, database_error
from collector.ingest.tokens import TokenCache
from collector.leader import Leadership, held_elsewhere
from collector.liveness.arrivals import Arrivals
from collector.liveness.backlog import BacklogMiddleware, IngestBacklog
from collector.liveness.collector_runs import start_collector_run, stop_collector_run
from collector.matrix.runner import MatrixRunner
from collector.matrix.schedule import register_matrix_schedules, register_pickup
from collector.metrics.exposition import METRICS_DIR
from collector.metrics.ingest import IngestMetrics, IngestMetricsMiddleware
from collector.metrics.jobs import JobMetrics
from collector.netconsole.channel import NetconsoleChannel
from collector.netconsole.published import open_netconsole
from collector.remote.ssh import SSHClient
from collector.scheduler import build_scheduler
from collector.settings import Settings
from collector.throttle import LoginThrottle
from collector.timeutil import from_epoch
from collector.vllm.state import VllmStates
from collector.web import pages
from collector.web.templates import make_templates

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"


class WeakAdminToken(ValueError):
    """The configured admin token is too weak to start with (the message says how to make
    one)."""


@dataclass(frozen=True)
class WorkerRole:
    """This process is one of ``serve --workers`` (``collector.workers``)."""

    shared_dir: Path  # what the workers share: per-process metrics, the receiver's figures
    receiver: bool  # whether it runs the netconsole receiver (one worker does)
    replacement: bool = False  # started in place of a worker that died


def create_app(
    settings: Settings | None = None,
    *,
    clock: Callable[[], float] = time.time,
    ssh: SSHClient | None = None,
    worker: WorkerRole | None = None,
) -> FastAPI:
    """The app; ``clock`` (epoch seconds) and ``ssh`` are the world it runs in; ``worker``:
    one of several processes on one port."""
    settings = settings or Settings()
    if settings.admin_token and (weak := auth.admin_token_problem(settings.admin_token)):
        raise WeakAdminToken(weak)
    ssh = ssh or SSHClient()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db.migrate(settings.db_url)
        engine = db.make_engine(settings.db_url)
        factory = db.make_sessionmaker(engine)
        app.state.engine = engine
        app.state.sessionmaker = factory
        # Batches stored at once; more wait in its queue, not in threads blocked on the database.
        store_pool = ThreadPoolExecutor(settings.ingest_concurrency, thread_name_prefix="ingest")
        app.state.store_pool = store_pool
        inline_engine = db.make_loop_engine(settings.db_url)
        app.state.inline_sessionmaker = (
            None if inline_engine is None else db.make_sessionmaker(inline_engine)
        )
        with db.session_scope(factory) as session:
            generated = auth.ensure_admin_token(session, configured=settings.admin_token)
            sync_env_targets(session, settings=settings)
        if generated:
            # Printed once: only its hash is kept.
            print(f"freezewatch: generated admin token (shown once): {generated}", flush=True)
        leadership = app.state.leadership = Leadership(settings.db_url, clock=clock)
        with db.session_scope(factory) as session:
            joined = held_elsewhere(session)  # another replica watches the hosts
        run_id = start_collector_run(
            factory, now=from_epoch(clock()), settings=settings, joined=joined
        )
        http_client = httpx.Client(follow_redirects=False)
        app.state.http_client = http_client
        app.state.scheduler = None
        if settings.run_scheduler:
            leadership.refresh()  # a lone collector leads from its first tick
            app.state.scheduler = build_scheduler(
                factory,
                settings=settings,
                run_id=run_id,
                http_client=http_client,
                ssh=ssh,
                clock=clock,
                leadership=leadership,
                jobs=app.state.job_metrics,
                backlog=app.state.ingest_backlog,
                arrivals=app.state.arrivals,
                stopping=app.state.stopping,
            )
        app.state.netconsole, publisher = open_netconsole(
            factory,
            settings=settings,
            shared_dir=None if worker is None else worker.shared_dir,
            owner=worker is None or worker.receiver,
        )
        runner = start_matrix_runner(app, settings)
        loop_watch = asyncio.create_task(app.state.ingest_backlog.watch_loop())
        if app.state.scheduler is not None:
            app.state.scheduler.start()
        try:
            yield
        finally:
            loop_watch.cancel()
            if app.state.scheduler is not None:
                app.state.scheduler.shutdown(wait=True)
            runner.shutdown()
            if publisher is not None:
                publisher.stop()
            if isinstance(app.state.netconsole, NetconsoleChannel):
                app.state.netconsole.stop()
            leadership.close()
            store_pool.shutdown(wait=True)
            stop_collector_run(factory, run_id=run_id, now=from_epoch(clock()))
            http_client.close()
            engine.dispose()
            if inline_engine is not None:
                inline_engine.dispose()

    app = FastAPI(
        title="freezewatch collector",
        version="0.1.0",
        lifespan=lifespan,
        description="Heartbeats, kernel lines and telemetry from GPU inference hosts.",
        generate_unique_id_function=operation_id,
        responses=ERROR_RESPONSES,
    )
    app.state.settings = settings
    app.state.metrics_dir = None if worker is None else worker.shared_dir / METRICS_DIR
    app.state.clock = clock
    app.state.ssh = ssh
    app.state.netconsole = None
    app.state.leadership = None
    app.state.scheduler = None
    app.state.vllm_states = VllmStates(hang_stall_s=settings.vllm_hang_s)
    app.state.arrivals = Arrivals()
    app.state.ingest_backlog = IngestBacklog()
    app.state.agent_tokens = TokenCache()
    # Set when the process starts to stop (cli.StoppingServer): silence judged no more.
    app.state.stopping = threading.Event()
    app.state.templates = make_templates(clock)
    app.state.ingest_metrics = IngestMetrics()
    app.state.job_metrics = JobMetrics()
    if worker is not None and worker.replacement:
        app.state.job_metrics.worker_restarts.inc()  # summed over the workers' metric files
    app.state.login_throttle = LoginThrottle(clock)
    app.add_middleware(ingest.IngestLane)  # inside the metrics: they count what it answers
    app.add_middleware(IngestMetricsMiddleware, metrics=app.state.ingest_metrics)
    app.add_middleware(BacklogMiddleware, backlog=app.state.ingest_backlog)
    for api in (
        ingest,
        hosts,
        host_records,
        deploy,
        incidents,
        webhooks,
        health,
        matrix,
        netconsole,
    ):
        app.include_router(api.router)
    app.include_router(matrix.presets_router)
    app.include_router(pages.router)
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = errors_as_json(document_ingest_body(FastAPI.openapi(app)))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(AppError)
    async def app_error(request: Request, exc: AppError) -> Response:
        if isinstance(exc, AuthFailed) and pages.wants_html(request):
            return pages.login_redirect(request)
        if isinstance(exc, NotFound) and pages.wants_html(request):
            return pages.not_found_page(request, exc.detail)
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(OperationalError)
    async def database_down(request: Request, exc: OperationalError) -> Response:
        answer = database_error(exc)
        if answer.status_code == 503:
            log.warning("%s %s: database unavailable (%s)", request.method, request.url.path, exc)
        else:
            log.error("%s %s: database error", request.method, request.url.path, exc_info=exc)
        return await app_error(request, answer)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> Response:
        return parameter_error(exc) or body_error(exc)

    @app.exception_handler(ingest.BatchInvalid)
    async def batch_invalid(request: Request, exc: ingest.BatchInvalid) -> Response:
        return exc.response()

    @app.exception_handler(matrix.SpecInvalid)
    async def spec_invalid(request: Request, exc: matrix.SpecInvalid) -> Response:
        return matrix.spec_invalid_response(exc)

    return app


def named_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Where and why, without the refused input (which may not even be JSON: ``1e400``)."""
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]


def body_error(exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 shape (``detail``: the errors)."""
    return JSONResponse({"detail": named_errors(exc)}, status_code=422)


def parameter_error(exc: RequestValidationError) -> JSONResponse | None:
    """A query or path parameter out of range is a 400 naming it (a body stays a 422)."""
    named = named_errors(exc)
    if not named or any(e["loc"][0] not in ("query", "path", "header") for e in named):
        return None
    where = "; ".join(f"{e['loc'][0]} parameter {e['loc'][-1]}: {e['msg']}" for e in named)
    return JSONResponse({"detail": f"invalid {where}", "errors": named}, status_code=400)


def operation_id(route: APIRoute) -> str:
    """The route function's name (``list_hosts``): what generated clients call it."""
    return route.name


def start_matrix_runner(app: FastAPI, settings: Settings) -> MatrixRunner:
    """The matrix runner: queued runs start and runs left ``running`` by a stopped collector
    are taken over (now, and periodically once their lease expires, when the app has a
    scheduler); cron schedules are registered."""
    factory = app.state.sessionmaker
    runner = MatrixRunner(
        factory,
        data_dir=Path(settings.data_dir),
        ssh=app.state.ssh,
        settle_s=settings.matrix_settle_s,
        lease_s=settings.matrix_lease_s,
        clock=app.state.clock,
        leading=lambda: app.state.scheduler is not None and app.state.leadership.held,
    )
    app.state.matrix_runner = runner
    runner.pick_up_work()
    if app.state.scheduler is not None:
        register_matrix_schedules(app.state.scheduler, factory, runner)
        register_pickup(app.state.scheduler, factory, runner, every_s=settings.matrix_lease_s / 2)
    return runner
