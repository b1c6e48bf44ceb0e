"""POST /api/v1/ingest: a batch from an agent, authenticated by the host's token.

This route is its own commit point: each database step (the token lookup, a read that never
waits for the writer, then storing the batch) runs whole inside one worker thread, so no
transaction is ever open across an await.
On SQLite a transaction holds the one write lock: a request that held it while reading its
body and waiting for a worker to store it could wait for ever behind workers blocked on that
very lock (20 agents were enough to stall ingest for the busy timeout, and hosts went late).
A batch is a heartbeat from its arrival: while it waits to be stored the checker knows it is
in hand (``liveness.arrivals``).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from functools import partial

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.wire import INGEST_PATH, MAX_BATCH_RECORDS
from collector.auth import bearer_token, hash_token, host_for_token
from collector.db import WriteLockBusy, read_scope, session_scope, write_now
from collector.deps import Ingest, IngestDep, get_ingest
from collector.errors import (
    AppError,
    AuthFailed,
    BadRequest,
    Forbidden,
    PayloadTooLarge,
    Unavailable,
    database_error,
)
from collector.ingest.batch import ingest_batch
from collector.ingest.tokens import TokenHost
from collector.schemas import Batch, IngestResult
from collector.timeutil import from_epoch
from collector.vllm.state import StaleState

log = logging.getLogger(__name__)
router = APIRouter(tags=["ingest"])
# Answered to a client that went away mid-body (nobody reads it): nothing was stored.
CLIENT_GONE = 499
# A batch this small (records) is stored on the event loop when it can be (see _stored).
INLINE_RECORDS = 64


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, gunzipped, refusing anything over ``limit`` bytes (gzip bombs too)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body over {limit} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    if request.headers.get("content-encoding", "").lower() != "gzip":
        return body
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadRequest(f"body is not valid gzip: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise PayloadTooLarge(f"decompressed body over {limit} bytes")
    return out


@router.post(INGEST_PATH, response_model=IngestResult)
async def ingest(request: Request, app: IngestDep) -> Response:
    """Store one batch. (The app answers it through ``IngestLane``; the route gives the API
    schema, and the same answer where the lane is not installed.)"""
    return await answer(request, app)


async def answer(request: Request, app: Ingest) -> Response:
    """The ingest request's answer; raises ``AppError``/``BatchInvalid`` for the handlers."""
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise AuthFailed("missing bearer token")
    token_hash = hash_token(token)
    # Authenticate before reading the body: an unknown client cannot make us parse 16 MiB.
    # A token seen valid before skips the query; storing checks it again (collector.ingest.tokens).
    host = app.tokens.get(token_hash)
    if host is None:
        try:
            host = await run_in_threadpool(_authenticate, app.factory, token)
        except OperationalError as exc:
            raise _database_down(exc) from None
        if host is None:
            raise AuthFailed("unknown host token")
        app.tokens.put(token_hash, host)
    try:
        body = await read_body(request, app.settings.max_body_bytes)
    except ClientDisconnect:
        # An agent killed or cut off mid-POST: expected; it resends what it still has.
        log.info("host %s: client disconnected mid-body; nothing stored", host.name)
        return Response(status_code=CLIENT_GONE)
    try:
        batch = Batch.model_validate_json(body)
    except ValidationError as exc:
        raise BatchInvalid(exc) from None
    records = len(batch.samples) + len(batch.lines) + len(batch.events)
    if records > MAX_BATCH_RECORDS:
        raise PayloadTooLarge(f"{records} records in one batch; the limit is {MAX_BATCH_RECORDS}")
    if host.name != batch.host:
        raise Forbidden(f"token belongs to host {host.name!r}, batch says {batch.host!r}")
    # The database work is synchronous; run it off the event loop. Committed when it returns:
    # a 200 means stored. It is a heartbeat from now on, however long it waits to be stored.
    received_at = app.clock()
    store = partial(_store, app, host.id, token_hash, batch, received_at)
    with app.arrivals.holding(host.id):
        try:
            result = await _stored(app, store, records)
        except AuthFailed:
            app.tokens.forget(token_hash)  # rotated, or the host deleted, since it was cached
            raise
        except OperationalError as exc:  # rolled back: nothing of the batch was stored
            raise _database_down(exc) from None
    app.metrics.observe(result)
    # Serialized here, once: the declared response_model is for the API's schema only.
    return Response(result.model_dump_json(), media_type="application/json")


def _database_down(exc: OperationalError) -> AppError:
    answer = database_error(exc)
    if isinstance(answer, Unavailable):
        log.warning("ingest: database unavailable (%s); answered 503", str(exc.orig or exc)[:200])
    else:
        log.error("ingest: database error (%s); answered 500", exc, exc_info=exc)
    return answer


async def _stored(app: Ingest, store: Callable[[bool], IngestResult], records: int) -> IngestResult:
    """``store`` run where it costs least. A small batch on SQLite (a heartbeat, a line or
    two: most requests) is stored right here on the event loop when the write lock is free this
    instant: the hop to a thread and back was a quarter of such a request's CPU and a tenth of
    a kernel line's way to the database. Anything else goes to ingest's own threads
    (ingest_concurrency): the others wait in its queue, not in threads blocked on the
    database, and the token lookups keep the shared pool."""
    if app.inline_factory is not None and records <= INLINE_RECORDS:
        try:
            return store(False)
        except WriteLockBusy:
            pass  # another writer has it: wait for it in a thread, never on the loop
    return await asyncio.get_running_loop().run_in_executor(app.store_pool, store, True)


def _authenticate(factory: sessionmaker[Session], token: str) -> TokenHost | None:
    """The token's host; a read that never waits for the writer."""
    with read_scope(factory) as session:
        host = host_for_token(session, token=token)
        return None if host is None else TokenHost(host.id, host.name)


def _store(
    app: Ingest, host_id: int, token_hash: str, batch: Batch, received_at: float, wait: bool
) -> IngestResult:
    """``wait``: for SQLite's write lock as long as it takes; else ``WriteLockBusy`` at once,
    on the event loop's own connection (a pooled one could keep it waiting for the pool).
    A batch that met another process's vLLM state is stored again, once: the second time reads
    the state under its lock, which no other process can move. Should it meet it moved again
    anyway (the row deleted and made anew, or a bug), ``Unavailable``: a 503 the agent retries,
    its transaction rolled back, nothing stored."""
    factory = app.factory if wait or app.inline_factory is None else app.inline_factory
    store = partial(_store_once, app, factory, host_id, token_hash, batch, received_at, wait)
    try:
        return store()
    except StaleState:
        pass  # rolled back; the copy forgotten: again, from the row
    try:
        return store()
    except StaleState as exc:
        log.warning("host %s: batch not stored, its vLLM state moved twice (%s)", host_id, exc)
        raise Unavailable(
            "batch not stored: the host's vLLM state moved under it twice (another collector"
            " storing this host's batches at the same time); nothing was stored, send it again"
        ) from None


def _store_once(
    app: Ingest,
    factory: sessionmaker[Session],
    host_id: int,
    token_hash: str,
    batch: Batch,
    received_at: float,
    wait: bool,
) -> IngestResult:
    with session_scope(factory) as session:
        if not wait:
            write_now(session)
        return ingest_batch(
            session,
            host_id=host_id,
            token_hash=token_hash,
            batch=batch,
            received_at=received_at,
            now=from_epoch(received_at),
            settings=app.settings,
            vllm_states=app.vllm_states,
        )


class IngestLane:
    """``POST /api/v1/ingest`` answered ahead of the router, with the route's own ``answer``.

    A pure ASGI middleware: a heartbeat skips the routing, the dependency solving and the
    exception-handling layers, which cost more CPU than the rest of the request (most requests
    are heartbeats). Errors get the responses the app's handlers give them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != INGEST_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await answer(request, await get_ingest(request))
        except AppError as exc:
            response = JSONResponse(
                {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
            )
        except BatchInvalid as exc:
            response = exc.response()
        await response(scope, receive, send)


class BatchInvalid(Exception):
    """A batch failing validation: rejected whole, with every field that is wrong."""

    def __init__(self, error: ValidationError) -> None:
        super().__init__(str(error))
        self.errors = [
            {
                "loc": list(e["loc"]),
                "msg": e["msg"],
                "type": e["type"],
            }
            for e in error.errors(include_url=False, include_input=False)
        ]

    def response(self) -> Response:
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "body" for e in self.errors[:5])
        return JSONResponse(
            {"detail": f"batch rejected, nothing stored: invalid {where}", "errors": self.errors},
            status_code=422,
        )
