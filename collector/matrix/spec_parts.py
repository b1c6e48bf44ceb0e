"""The parts of a matrix spec: how the server is launched, how cold each start is, the
workloads and the gates. ``collector.matrix.spec`` puts them together."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from agent.kernel.classify import EVENT_KINDS
from collector.remote.commands import HomePath

KernelKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_DROP_CACHES = ["sudo", "-n", "sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"]
DEFAULT_REBOOT = ["sudo", "-n", "systemctl", "reboot"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def check_env(env: dict[str, Any]) -> dict[str, Any]:
    for key in env:
        if not _ENV_NAME.match(key):
            raise ValueError(f"invalid environment variable name {key!r}")
    return env


def check_volume(volume: str) -> str:
    """A ``-v`` value: one from ``~`` is the SSH user's home on the host (``~/x``, ``~:x``)."""
    if volume.startswith("~"):
        HomePath(volume)  # ValueError for ~user
    if volume.startswith("-"):
        raise ValueError(f"{volume!r} would be read as a docker option")
    return volume


def check_image(image: str) -> str:
    if image.startswith("-") or any(c.isspace() for c in image):
        raise ValueError(
            f"image {image!r} must not start with '-' or hold spaces "
            "(docker would read it as an option)"
        )
    return image


class DockerLauncher(Model):
    """Start the server as ``docker run ... <image> -lc "<serve command>"`` (NemoClaw's way)."""

    type: Literal["docker"] = "docker"
    image: Annotated[str, AfterValidator(check_image)] = Field(min_length=1)
    container_name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    pull: str | None = "never"
    restart: str | None = "unless-stopped"
    gpus: str | None = "all"
    ipc: str | None = "host"
    volumes: list[Annotated[str, AfterValidator(check_volume)]] = []
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    port: int = Field(default=8000, ge=1, le=65535)
    host_port: int | None = Field(default=None, ge=1, le=65535)
    extra_args: list[str] = []
    entrypoint: str | None = "/bin/bash"
    # With shell_wrap the serve argv (and `pre`) becomes one `-lc` string after the image.
    shell_wrap: bool = True

    _env = field_validator("env")(check_env)

    @property
    def published_port(self) -> int:
        return self.host_port or self.port


class CommandLauncher(Model):
    """Start the server as a plain process (the runner puts it in its own process group)."""

    type: Literal["command"] = "command"
    env: dict[str, str] = {}
    cwd: str | None = None

    _env = field_validator("env")(check_env)


Launcher = Annotated[DockerLauncher | CommandLauncher, Field(discriminator="type")]
# True: before every repetition; a list: before those repetitions (1-based); False: never.
RebootWhen = bool | list[Annotated[int, Field(ge=1)]]


class ColdStart(Model):
    """Stop and remove the previous server first; dropping the page cache is opt-in (root).

    ``reboot`` reboots the host itself before the profile starts (``reboot_argv`` over SSH),
    waits up to ``reboot_timeout_s`` for the agent to report a new boot id and then for the
    host to stay up ``settle_s``; the same settle follows a host's return after a freeze.
    """

    enabled: bool = True
    drop_caches: bool = False
    drop_caches_argv: list[str] = Field(default_factory=lambda: list(DEFAULT_DROP_CACHES))
    reboot: RebootWhen = False
    reboot_argv: list[str] = Field(default_factory=lambda: list(DEFAULT_REBOOT), min_length=1)
    reboot_timeout_s: float = Field(default=900.0, gt=0)
    settle_s: float = Field(default=30.0, ge=0)

    def reboots(self, repetition: int) -> bool:
        if isinstance(self.reboot, bool):
            return self.reboot
        return repetition in self.reboot


class ColdStartOverride(Model):
    """A profile's changes to the spec's ``cold_start`` (unset fields keep the spec's)."""

    enabled: bool | None = None
    drop_caches: bool | None = None
    reboot: RebootWhen | None = None
    settle_s: float | None = Field(default=None, ge=0)


class ToolConversationSpec(Model):
    """Deterministic growing tool-call conversation against ``/v1/chat/completions``.

    Without ``duration_s`` each session holds one conversation until ``target_prompt_tokens``
    or ``max_turns``. With it (a soak) the sessions run for ``duration_s``: a conversation that
    reaches its target starts a fresh one, so the soak keeps mixing prefill and decode.
    """

    type: Literal["tool_conversation"] = "tool_conversation"
    name: str = Field(default="tool_conversation", pattern=NAME)
    seed: int = 0
    sessions: int = Field(default=1, ge=1, le=64)
    target_prompt_tokens: int = Field(default=65536, ge=1)
    max_turns: int = Field(default=200, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    request_timeout_s: float = Field(default=360.0, gt=0)
    tool_result_bytes: int = Field(default=4096, ge=64)
    max_tool_retries: int = Field(default=2, ge=0)
    max_error_retries: int = Field(default=2, ge=0)
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    slow_request_s: float = Field(default=30.0, gt=0)
    # None: the served model name derived from base_args.
    model: str | None = None
    # None: derived from the server's port on the host (the runner may forward it).
    base_url: str | None = None


class CommandWorkloadSpec(Model):
    """A shell workload run on the host (e.g. a real agent framework's workflow)."""

    type: Literal["command"] = "command"
    name: str = Field(pattern=NAME)
    argv: list[str] = Field(min_length=1)
    timeout_s: float = Field(default=3600.0, gt=0)
    env: dict[str, str] = {}
    output_tail_bytes: int = Field(default=8192, ge=0)

    _env = field_validator("env")(check_env)


Workload = Annotated[ToolConversationSpec | CommandWorkloadSpec, Field(discriminator="type")]


class Gates(Model):
    """Thresholds that turn a profile's results into PASS/FAIL; None disables a gate."""

    fail_on_kernel: list[KernelKind] = ["nv_err", "xid", "gsp", "uvm"]
    # A repetition during which the host froze (an incident opened) fails.
    fail_on_freeze: bool = True
    min_mem_available_gib: float | None = Field(default=None, ge=0)
    max_p95_latency_s: float | None = Field(default=None, gt=0)
    max_errors: int | None = Field(default=None, ge=0)
    max_malformed_tool_calls: int | None = Field(default=None, ge=0)
