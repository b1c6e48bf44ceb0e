"""POST /api/v1/hosts/{name}/deploy: install, upgrade or remove the agent over SSH (admin).

The request runs the deploy to its end (upload, start, the first batch) and answers its report,
as ``freezewatch-collector deploy-agent`` prints it with ``--json``.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from collector.deploy.install import DeployOptions, deploy_agent, uninstall_agent
from collector.deploy.report import InstallReport, UninstallReport
from collector.deps import AdminBriefDep, ClockDep, SessionFactoryDep, SettingsDep, SSHDep
from collector.params import HostName
from collector.schemas import InModel

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


class DeployIn(InModel):
    netconsole: bool = False
    netconsole_to: str | None = Field(None, description="HOST:PORT; default: the collector")
    collector_url: str | None = Field(None, pattern=r"^https?://")
    uninstall: bool = False
    start: bool = True
    root: str = Field("/", pattern=r"^/")
    wait_s: float = Field(60.0, ge=0, le=600)


@router.post("/{name}/deploy")
def deploy(
    name: HostName,
    body: DeployIn,
    factory: SessionFactoryDep,
    settings: SettingsDep,
    ssh: SSHDep,
    clock: ClockDep,
    _: AdminBriefDep,
) -> InstallReport | UninstallReport:
    options = DeployOptions(
        netconsole=body.netconsole,
        netconsole_to=body.netconsole_to,
        collector_url=body.collector_url,
        start=body.start,
        root=body.root,
        wait_s=body.wait_s,
    )
    if body.uninstall:
        return uninstall_agent(factory, name=name, ssh=ssh, options=options)
    return deploy_agent(
        factory, name=name, ssh=ssh, settings=settings, options=options, clock=clock
    )
