"""GET /api/v1/netconsole: the receiver's own counters (admin token)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from collector.deps import AdminDep, NetconsoleDep
from collector.netconsole.channel import ChannelStatsOut

router = APIRouter(prefix="/api/v1/netconsole", tags=["netconsole"])


class NetconsoleOff(BaseModel):
    """No receiver runs (``FREEZEWATCH_NETCONSOLE_BIND`` unset)."""

    enabled: Literal[False] = False


class NetconsoleOn(ChannelStatsOut):
    enabled: Literal[True] = True


@router.get("")
def netconsole_stats(netconsole: NetconsoleDep, _: AdminDep) -> NetconsoleOn | NetconsoleOff:
    if netconsole is None:
        return NetconsoleOff()
    return NetconsoleOn(**dict(netconsole.stats()))
