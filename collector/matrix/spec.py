"""The matrix spec: what to launch on the host, which profiles to vary, which workloads and gates.

``load_spec`` accepts YAML or JSON (text or a file path) and raises ``SpecError`` whose message
names every offending field by its dotted path (``profiles.C.remove.0: ...``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from apscheduler.triggers.cron import CronTrigger
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.kernel.classify import EVENT_KINDS
from collector.matrix.flags import flag_key, flag_names, flag_value

KernelKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_DROP_CACHES = ["sudo", "-n", "sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"]


class SpecError(ValueError):
    """A matrix spec that does not parse or validate; the message lists field paths."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_env(env: dict[str, Any]) -> dict[str, Any]:
    for key in env:
        if not _ENV_NAME.match(key):
            raise ValueError(f"invalid environment variable name {key!r}")
    return env


class DockerLauncher(_Model):
    """Start the server as ``docker run ... <image> -lc "<serve command>"`` (NemoClaw's way)."""

    type: Literal["docker"] = "docker"
    image: str = Field(min_length=1)
    container_name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    pull: str | None = "never"
    restart: str | None = "unless-stopped"
    gpus: str | None = "all"
    ipc: str | None = "host"
    volumes: list[str] = []
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    port: int = Field(default=8000, ge=1, le=65535)
    host_port: int | None = Field(default=None, ge=1, le=65535)
    extra_args: list[str] = []
    entrypoint: str | None = "/bin/bash"
    # With shell_wrap the serve argv (and `pre`) becomes one `-lc` string after the image.
    shell_wrap: bool = True

    _env = field_validator("env")(_check_env)

    @property
    def published_port(self) -> int:
        return self.host_port or self.port


class CommandLauncher(_Model):
    """Start the server as a plain process (the runner puts it in its own process group)."""

    type: Literal["command"] = "command"
    env: dict[str, str] = {}
    cwd: str | None = None

    _env = field_validator("env")(_check_env)


def _check_flag(flag: str) -> str:
    if not flag.startswith("-") or "=" in flag:
        raise ValueError(f"{flag!r} is not a flag name (expected e.g. '--max-model-len')")
    return flag


FlagName = Annotated[str, AfterValidator(_check_flag)]

Launcher = Annotated[DockerLauncher | CommandLauncher, Field(discriminator="type")]


class Profile(_Model):
    """One variation of the base args: drop flags, replace values, append args, change env."""

    description: str = ""
    remove: list[FlagName] = []
    set: dict[FlagName, str | int | float | bool | None] = {}
    add: list[str] = []
    # None unsets a variable the launcher or base sets.
    env: dict[str, str | None] = {}

    _env = field_validator("env")(_check_env)


class ColdStart(_Model):
    """Stop and remove the previous server first; dropping the page cache is opt-in (root)."""

    enabled: bool = True
    drop_caches: bool = False
    drop_caches_argv: list[str] = Field(default_factory=lambda: list(DEFAULT_DROP_CACHES))


class ToolConversationSpec(_Model):
    """Deterministic growing tool-call conversation against ``/v1/chat/completions``."""

    type: Literal["tool_conversation"] = "tool_conversation"
    name: str = Field(default="tool_conversation", pattern=_NAME)
    seed: int = 0
    sessions: int = Field(default=1, ge=1, le=64)
    target_prompt_tokens: int = Field(default=65536, ge=1)
    max_turns: int = Field(default=200, ge=1)
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


class CommandWorkloadSpec(_Model):
    """A shell workload run on the host (e.g. a real agent framework's workflow)."""

    type: Literal["command"] = "command"
    name: str = Field(pattern=_NAME)
    argv: list[str] = Field(min_length=1)
    timeout_s: float = Field(default=3600.0, gt=0)
    env: dict[str, str] = {}
    output_tail_bytes: int = Field(default=8192, ge=0)

    _env = field_validator("env")(_check_env)


Workload = Annotated[ToolConversationSpec | CommandWorkloadSpec, Field(discriminator="type")]


class Gates(_Model):
    """Thresholds that turn a profile's results into PASS/FAIL; None disables a gate."""

    fail_on_kernel: list[KernelKind] = ["nv_err", "xid", "gsp", "uvm"]
    min_mem_available_gib: float | None = Field(default=None, ge=0)
    max_p95_latency_s: float | None = Field(default=None, gt=0)
    max_errors: int | None = Field(default=None, ge=0)
    max_malformed_tool_calls: int | None = Field(default=None, ge=0)


class MatrixSpec(_Model):
    """A complete matrix: base launch x profiles x repetitions, workloads and gates."""

    name: str = Field(default="matrix", pattern=_NAME)
    host: str = Field(min_length=1)
    launcher: Launcher
    base_args: list[str] = Field(min_length=1)
    # A shell prelude run before the server, joined with `&&` (e.g. a pip install).
    pre: str | None = None
    profiles: dict[str, Profile] = Field(min_length=1)
    repeat: int = Field(default=1, ge=1, le=100)
    cold_start: ColdStart = ColdStart()
    startup_timeout_s: float = Field(default=1800.0, gt=0)
    health_url: str | None = None
    workloads: list[Workload] = []
    gates: Gates = Gates()
    schedule: str | None = None
    abort_on_failure: bool = False

    @field_validator("cold_start", mode="before")
    @classmethod
    def _cold_start_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, profiles: dict[str, Profile]) -> dict[str, Profile]:
        for name in profiles:
            if not re.match(_NAME, name):
                raise ValueError(f"invalid profile name {name!r} (letters, digits, _.+-)")
        return profiles

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            CronTrigger.from_crontab(value)
        except ValueError as exc:
            raise ValueError(f"not a 5-field cron expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MatrixSpec:
        present = flag_names(self.base_args)
        problems = []
        for pname, profile in self.profiles.items():
            for i, flag in enumerate(profile.remove):
                if flag_key(flag) not in present:
                    problems.append(
                        f"profiles.{pname}.remove.{i}: {flag} is not in base_args "
                        "(a typo would make this profile identical to the base)"
                    )
        names = [w.name for w in self.workloads]
        for name in {n for n in names if names.count(n) > 1}:
            problems.append(f"workloads: duplicate workload name {name!r}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def server_port(self) -> int:
        """The port the server answers on, as seen from the host."""
        if isinstance(self.launcher, DockerLauncher):
            return self.launcher.published_port
        value = flag_value(self.base_args, "--port")
        return int(value) if value and value.isdigit() else 8000

    @property
    def effective_health_url(self) -> str:
        return self.health_url or f"http://127.0.0.1:{self.server_port}/health"


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "(spec)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {msg}")
    return "invalid matrix spec:\n  " + "\n  ".join(lines)


def parse_spec_text(text: str) -> dict[str, Any]:
    """Parse YAML or JSON text into a mapping (no validation)."""
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError("invalid matrix spec: the top level must be a mapping")
    return data


def validate_spec(data: dict[str, Any]) -> MatrixSpec:
    """Validate an already parsed mapping."""
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_errors(exc)) from None


def load_spec(text_or_path: str | Path) -> MatrixSpec:
    """Load a spec from YAML/JSON text or a file path; raises SpecError with field paths."""
    if isinstance(text_or_path, Path) or (
        "\n" not in text_or_path and text_or_path.endswith((".yaml", ".yml", ".json"))
    ):
        try:
            text = Path(text_or_path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot read spec file: {exc}") from None
    else:
        text = text_or_path
    return validate_spec(parse_spec_text(text))
