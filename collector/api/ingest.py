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

import logging
import zlib

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from agent.wire import INGEST_PATH, MAX_BATCH_RECORDS
from collector.auth import bearer_token, host_for_token
from collector.db import read_scope, session_scope
from collector.deps import (
    ArrivalsDep,
    ClockDep,
    IngestMetricsDep,
    SessionFactoryDep,
    SettingsDep,
    StoreSlotsDep,
    VllmStatesDep,
)
from collector.errors import AuthFailed, BadRequest, Forbidden, PayloadTooLarge
from collector.ingest.batch import ingest_batch
from collector.models import Host
from collector.schemas import Batch, IngestResult
from collector.settings import Settings
from collector.timeutil import from_epoch
from collector.vllm.state import VllmStates

log = logging.getLogger(__name__)
router = APIRouter(tags=["ingest"])
# Answered to a client that went away mid-body (nobody reads it): nothing was stored.
CLIENT_GONE = 499


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
async def ingest(
    request: Request,
    factory: SessionFactoryDep,
    settings: SettingsDep,
    clock: ClockDep,
    vllm_states: VllmStatesDep,
    ingest_metrics: IngestMetricsDep,
    arrivals: ArrivalsDep,
    store_slots: StoreSlotsDep,
) -> IngestResult | Response:
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise AuthFailed("missing bearer token")
    # Authenticate before reading the body: an unknown client cannot make us parse 16 MiB.
    host = await run_in_threadpool(_authenticate, factory, token)
    if host is None:
        raise AuthFailed("unknown host token")
    host_id, host_name = host
    try:
        body = await read_body(request, settings.max_body_bytes)
    except ClientDisconnect:
        # An agent killed or cut off mid-POST: expected; it resends what it still has.
        log.info("host %s: client disconnected mid-body; nothing stored", host_name)
        return Response(status_code=CLIENT_GONE)
    try:
        batch = Batch.model_validate_json(body)
    except ValidationError as exc:
        raise BatchInvalid(exc) from None
    records = len(batch.samples) + len(batch.lines) + len(batch.events)
    if records > MAX_BATCH_RECORDS:
        raise PayloadTooLarge(f"{records} records in one batch; the limit is {MAX_BATCH_RECORDS}")
    if host_name != batch.host:
        raise Forbidden(f"token belongs to host {host_name!r}, batch says {batch.host!r}")
    # The database work is synchronous; run it off the event loop. Committed when it returns:
    # a 200 means stored. It is a heartbeat from now on, however long it waits to be stored.
    received_at = clock()
    with arrivals.holding(host_id):
        # At most ingest_concurrency at once: the others wait here, not in worker threads
        # blocked on the database (which would leave none for the token lookups).
        async with store_slots:
            result = await run_in_threadpool(
                _store, factory, settings, host_id, batch, received_at, vllm_states
            )
    ingest_metrics.observe(result)
    return result


def _authenticate(factory: sessionmaker[Session], token: str) -> tuple[int, str] | None:
    """(id, name) of the token's host; a read that never waits for the writer."""
    with read_scope(factory) as session:
        host = host_for_token(session, token=token)
        return None if host is None else (host.id, host.name)


def _store(
    factory: sessionmaker[Session],
    settings: Settings,
    host_id: int,
    batch: Batch,
    received_at: float,
    vllm_states: VllmStates,
) -> IngestResult:
    with session_scope(factory) as session:
        host = session.get(Host, host_id)
        if host is None:
            raise AuthFailed("host removed")
        return ingest_batch(
            session,
            host=host,
            batch=batch,
            received_at=received_at,
            now=from_epoch(received_at),
            settings=settings,
            vllm_states=vllm_states,
        )


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
