"""GET /api/v1/netconsole: the receiver's own counters (admin token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from collector.deps import AdminDep

router = APIRouter(prefix="/api/v1/netconsole", tags=["netconsole"])


@router.get("")
def netconsole_stats(request: Request, _: AdminDep) -> dict[str, Any]:
    channel = request.app.state.netconsole
    if channel is None:
        return {"enabled": False}
    return {"enabled": True, **channel.stats()}
