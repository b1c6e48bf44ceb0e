"""GET /api/v1/netconsole: the receiver's own counters (admin token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from collector.deps import AdminDep, NetconsoleDep

router = APIRouter(prefix="/api/v1/netconsole", tags=["netconsole"])


@router.get("")
def netconsole_stats(netconsole: NetconsoleDep, _: AdminDep) -> dict[str, Any]:
    if netconsole is None:
        return {"enabled": False}
    return {"enabled": True, **netconsole.stats()}
