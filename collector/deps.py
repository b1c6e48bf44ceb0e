"""FastAPI dependencies: the request's session (its one commit point), auth, and the resources
the app's lifespan built (matrix runner, netconsole channel, vLLM state, SSH layer, HTTP client,
clock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, cast

import httpx
from apscheduler.schedulers.base import BaseScheduler
from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session, sessionmaker

from collector import auth, origin, sessions
from collector.db import session_scope
from collector.errors import AuthFailed, Forbidden
from collector.ingest.tokens import TokenCache
from collector.liveness.arrivals import Arrivals
from collector.matrix.runner import MatrixRunner
from collector.metrics.ingest import IngestMetrics
from collector.metrics.jobs import JobMetrics
from collector.netconsole.published import ReceiverView
from collector.remote.ssh import SSHClient
from collector.settings import Settings
from collector.throttle import LoginThrottle
from collector.timeutil import from_epoch
from collector.vllm.state import VllmStates


def get_settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


def get_session(request: Request) -> Iterator[Session]:
    """The request's one commit point: commit on success, roll back on error; work queued
    with ``db.after_commit`` runs once the commit is done."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def get_session_factory(request: Request) -> sessionmaker[Session]:
    """For a route that is its own commit point: ingest (each step one transaction, run whole
    in one worker thread) and jobs run to the end (a deploy commits step by step)."""
    return cast("sessionmaker[Session]", request.app.state.sessionmaker)


def get_clock(request: Request) -> Callable[[], float]:
    """The app's clock, epoch seconds (injected by ``create_app``)."""
    return cast("Callable[[], float]", request.app.state.clock)


def get_now(request: Request) -> datetime:
    """One reading of the app's clock."""
    return from_epoch(get_clock(request)())


def get_runner(request: Request) -> MatrixRunner | None:
    return getattr(request.app.state, "matrix_runner", None)


def get_netconsole(request: Request) -> ReceiverView | None:
    return getattr(request.app.state, "netconsole", None)


def get_scheduler(request: Request) -> BaseScheduler | None:
    return getattr(request.app.state, "scheduler", None)


def is_leader(request: Request) -> bool:
    """Whether this process runs the singleton jobs (``collector.leader``)."""
    state = request.app.state
    return state.scheduler is not None and state.leadership is not None and state.leadership.held


def get_arrivals(request: Request) -> Arrivals:
    return cast(Arrivals, request.app.state.arrivals)


def get_vllm_states(request: Request) -> VllmStates:
    return cast(VllmStates, request.app.state.vllm_states)


def get_ssh(request: Request) -> SSHClient:
    return cast(SSHClient, request.app.state.ssh)


def get_http_client(request: Request) -> httpx.Client:
    """The app's outgoing HTTP client (alerts, test notifications)."""
    return cast(httpx.Client, request.app.state.http_client)


def get_ingest_metrics(request: Request) -> IngestMetrics:
    return cast(IngestMetrics, request.app.state.ingest_metrics)


def get_job_metrics(request: Request) -> JobMetrics:
    return cast(JobMetrics, request.app.state.job_metrics)


def get_templates(request: Request) -> Jinja2Templates:
    return cast(Jinja2Templates, request.app.state.templates)


SettingsDep = Annotated[Settings, Depends(get_settings)]
# scope="function": commit before the response is sent, so a 200 means stored.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SessionFactoryDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]
NowDep = Annotated[datetime, Depends(get_now)]
ClockDep = Annotated[Callable[[], float], Depends(get_clock)]
RunnerDep = Annotated[MatrixRunner | None, Depends(get_runner)]
NetconsoleDep = Annotated[ReceiverView | None, Depends(get_netconsole)]
SchedulerDep = Annotated[BaseScheduler | None, Depends(get_scheduler)]
LeaderDep = Annotated[bool, Depends(is_leader)]
VllmStatesDep = Annotated[VllmStates, Depends(get_vllm_states)]
ArrivalsDep = Annotated[Arrivals, Depends(get_arrivals)]
SSHDep = Annotated[SSHClient, Depends(get_ssh)]
TemplatesDep = Annotated[Jinja2Templates, Depends(get_templates)]
HttpClientDep = Annotated[httpx.Client, Depends(get_http_client)]
IngestMetricsDep = Annotated[IngestMetrics, Depends(get_ingest_metrics)]
JobMetricsDep = Annotated[JobMetrics, Depends(get_job_metrics)]


def get_login_throttle(request: Request) -> LoginThrottle:
    return cast(LoginThrottle, request.app.state.login_throttle)


LoginThrottleDep = Annotated[LoginThrottle, Depends(get_login_throttle)]


@dataclass(frozen=True)
class Ingest:
    """What the ingest route takes from the app, as one dependency: each dependency costs
    FastAPI work per request, and a heartbeat has little else to do."""

    factory: sessionmaker[Session]
    settings: Settings
    clock: Callable[[], float]
    vllm_states: VllmStates
    metrics: IngestMetrics
    arrivals: Arrivals
    store_pool: Executor  # the threads that store batches: ingest_concurrency of them
    tokens: TokenCache  # agent tokens this process has seen valid (collector.ingest.tokens)
    # SQLite: the event loop's own connection, for small batches stored there (api.ingest).
    inline_factory: sessionmaker[Session] | None


async def get_ingest(request: Request) -> Ingest:
    """``async``: FastAPI runs a plain ``def`` dependency in a worker thread (a round trip)."""
    state = request.app.state
    return Ingest(
        state.sessionmaker,
        state.settings,
        state.clock,
        state.vllm_states,
        state.ingest_metrics,
        state.arrivals,
        state.store_pool,
        state.agent_tokens,
        state.inline_sessionmaker,
    )


IngestDep = Annotated[Ingest, Depends(get_ingest)]


def require_admin(request: Request, session: SessionDep) -> None:
    """Admin API and pages: a Bearer admin token, or the UI's login session (whose state
    changes must come from the collector's own pages: ``collector.origin``)."""
    token = auth.bearer_token(request.headers.get("authorization"))
    if token is not None and auth.is_admin_token(session, token=token):
        return
    cookie = request.cookies.get(sessions.COOKIE_NAME)
    if sessions.is_valid(session, value=cookie, now=get_now(request)):
        if request.method not in origin.SAFE_METHODS:
            refused = origin.foreign_origin(request, get_settings(request).public_url)
            if refused is not None:
                raise Forbidden(refused)
        return
    raise AuthFailed("admin token required")


AdminDep = Annotated[None, Depends(require_admin)]


def require_admin_briefly(request: Request) -> None:
    """``require_admin`` in a transaction of its own, ended before the route runs: for a route
    that runs a long job (a deploy) and must not hold the database (SQLite's write lock) while
    the job's own steps, and every agent, write."""
    with session_scope(request.app.state.sessionmaker) as session:
        require_admin(request, session)


AdminBriefDep = Annotated[None, Depends(require_admin_briefly)]
