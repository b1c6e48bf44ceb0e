"""The matrix spec: what to launch on the host, which profiles to vary, which workloads and gates.

``load_spec`` accepts YAML or JSON (text or a file path) and raises ``SpecError`` whose message
names every offending field by its dotted path (``profiles.C.remove.0: ...``). The parts
(launchers, cold start, workloads, gates) live in ``collector.matrix.spec_parts``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from apscheduler.triggers.cron import CronTrigger
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from collector.matrix.flags import flag_key, flag_names, flag_value
from collector.matrix.spec_parts import (
    DEFAULT_DROP_CACHES,
    DEFAULT_REBOOT,
    NAME,
    ColdStart,
    ColdStartOverride,
    CommandLauncher,
    CommandWorkloadSpec,
    DockerLauncher,
    Gates,
    Launcher,
    Model,
    ToolConversationSpec,
    Workload,
    check_env,
)

__all__ = [
    "DEFAULT_DROP_CACHES",
    "DEFAULT_REBOOT",
    "ColdStart",
    "CommandLauncher",
    "CommandWorkloadSpec",
    "DockerLauncher",
    "Gates",
    "MatrixSpec",
    "Profile",
    "SpecError",
    "ToolConversationSpec",
    "load_spec",
    "parse_spec_text",
    "validate_spec",
]


class SpecError(ValueError):
    """A matrix spec that does not parse or validate; the message lists field paths."""


def _check_flag(flag: str) -> str:
    if not flag.startswith("-") or "=" in flag:
        raise ValueError(f"{flag!r} is not a flag name (expected e.g. '--max-model-len')")
    return flag


FlagName = Annotated[str, AfterValidator(_check_flag)]


def tagged_short_form(value: Any, types: tuple[str, ...]) -> Any:
    """``{docker: {image: ...}}`` is ``{type: docker, image: ...}`` (the form the guard's
    rules file uses, and the one the error paths suggest: ``launcher.docker.image``)."""
    if isinstance(value, dict) and len(value) == 1 and "type" not in value:
        [(key, inner)] = value.items()
        if key in types and isinstance(inner, dict) and "type" not in inner:
            return {"type": key, **inner}
    return value


class Profile(Model):
    """One variation of the base args: drop flags, replace values, append args, change env."""

    description: str = ""
    remove: list[FlagName] = []
    set: dict[FlagName, str | int | float | bool | None] = {}
    add: list[str] = []
    # None unsets a variable the launcher or base sets.
    env: dict[str, str | None] = {}
    # e.g. {reboot: true}: this profile's starts are colder (or warmer) than the spec's.
    cold_start: ColdStartOverride | None = None

    _env = field_validator("env")(check_env)


class MatrixSpec(Model):
    """A complete matrix: base launch x profiles x repetitions, workloads and gates."""

    name: str = Field(default="matrix", pattern=NAME)
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
    # After a freeze: how long to wait for the host to come back, and whether to stop there.
    freeze_wait_s: float = Field(default=1800.0, gt=0)
    abort_on_freeze: bool = False

    @field_validator("launcher", mode="before")
    @classmethod
    def _launcher_short(cls, value: Any) -> Any:
        return tagged_short_form(value, ("docker", "command"))

    @field_validator("workloads", mode="before")
    @classmethod
    def _workloads_short(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [tagged_short_form(w, ("tool_conversation", "command")) for w in value]

    @field_validator("cold_start", mode="before")
    @classmethod
    def _cold_start_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, profiles: dict[str, Profile]) -> dict[str, Profile]:
        for name in profiles:
            if not re.match(NAME, name):
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
        for where, when in [("cold_start", self.cold_start.reboot)] + [
            (f"profiles.{p}.cold_start", prof.cold_start.reboot)
            for p, prof in self.profiles.items()
            if prof.cold_start is not None
        ]:
            late = [r for r in when or [] if r > self.repeat] if isinstance(when, list) else []
            if late:
                problems.append(f"{where}.reboot: repetitions {late} beyond repeat {self.repeat}")
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

    def cold_start_for(self, profile: str) -> ColdStart:
        """The spec's cold start with the profile's overrides applied."""
        override = self.profiles[profile].cold_start
        if override is None:
            return self.cold_start
        changes = override.model_dump(exclude_none=True)
        return ColdStart.model_validate({**self.cold_start.model_dump(), **changes})

    def reboots(self, profile: str, repetition: int) -> bool:
        """Does this profile x repetition start with a reboot of the host?"""
        return self.cold_start_for(profile).reboots(repetition)

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
