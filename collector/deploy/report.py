"""What a deploy answers (the API's response, ``deploy-agent --json``'s output): what the host
is, what was written, removed and run, and how the new agent was first heard."""

from __future__ import annotations

from typing import Any, Literal

from collector.schemas import OutModel


class HostFacts(OutModel):
    """The host as the deploy found it: the SSH user, whether it is root, its python3 and
    whether it runs systemd."""

    user: str
    root: bool
    python3: str | None
    python_version: str | None
    systemd: bool


class BundleOut(OutModel):
    """The agent zipapp this collector built and uploaded."""

    version: str
    sha256: str
    bytes: int


class WrittenFile(OutModel):
    """A file the deploy installs; ``changed`` when it was uploaded (it differed)."""

    path: str
    mode: str
    bytes: int
    sha256: str
    changed: bool


class FirstBatch(OutModel):
    """The new agent as the collector heard it: ``sampling`` the sample sections it sends (empty
    until its first sample), the sources it has off and those that failed, as it said."""

    agent_version: str | None
    outdated: bool
    pid: int | None
    boot_id: str | None
    heard_at: float | None
    sampling: list[str]
    sources_off: list[dict[str, Any]]
    source_errors: list[dict[str, Any]]


class InstallReport(OutModel):
    """An install or upgrade. ``token`` says whether the host's agent token was kept or a new one
    issued; ``not_started`` why nothing was started (then ``would_run`` is what a start runs);
    ``heartbeat`` null when the started agent was not heard from (``agent_log`` its journal)."""

    host: str
    action: Literal["install"]
    host_facts: HostFacts
    bundle: BundleOut
    token: Literal["kept", "issued"]
    collector_url: str
    files: list[WrittenFile]
    removed: list[str]
    changed: bool
    started: bool
    not_started: str | None
    would_run: list[str]
    commands: list[str]
    heartbeat: FirstBatch | None
    agent_log: list[str] | None
    warnings: list[str]


class UninstallReport(OutModel):
    """A removal: what was removed and kept (the agent's sequence state); ``not_run`` why the
    unit was not stopped here (then ``would_run`` is what stopping it runs)."""

    host: str
    action: Literal["uninstall"]
    host_facts: HostFacts
    removed: list[str]
    kept: list[str]
    not_run: str | None
    would_run: list[str]
    commands: list[str]
