"""How the collector reaches a host on its own: SSH (with a pinned host key), vLLM URL, grace,
netconsole sender addresses. ``HostPatch`` is the one schema for these settings, used by the
API's PATCH and by ``add-host``. ``PowerControl`` (a command run on the collector host that
power-cycles the host) is set by ``add-host`` only: an admin token must not be a shell here."""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.orm import Session

from collector.errors import BadRequest
from collector.hosts.labels import MAX_LABELS, check_changes
from collector.models import RETENTION_KINDS, Host
from collector.schemas import InModel, OutModel

log = logging.getLogger(__name__)

# (host, port, timeout) -> (key_line, fingerprint); collector.remote.ssh.fetch_host_key in
# production (the API and the CLI hand it in).
KeyFetcher = Callable[[str, int, float], tuple[str, str]]


def normalize_addr(addr: str) -> str:
    """Canonical text of an IP address (IPv4-mapped IPv6 becomes IPv4); ValueError if not one."""
    ip = ipaddress.ip_address(addr.strip())
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


RetentionKind = Literal[RETENTION_KINDS]  # type: ignore[valid-type]
# A host's own grace: 0 (the collector's default) or within these bounds.
GRACE_MIN_S = 0.5
GRACE_MAX_S = 86400.0
# Days a host's data may be kept at most (a century): beyond is a typo.
RETENTION_MAX_DAYS = 36500.0


def check_grace(grace_s: float) -> float:
    """``grace_s`` if it is 0 or within GRACE_MIN_S..GRACE_MAX_S, else BadRequest."""
    if grace_s != 0 and not GRACE_MIN_S <= grace_s <= GRACE_MAX_S:
        raise BadRequest(
            f"grace must be 0 (the collector's default) or {GRACE_MIN_S:g}..{GRACE_MAX_S:g} s, "
            f"not {grace_s!r}"
        )
    return grace_s


def check_key_path(path: str) -> str:
    """``path`` if this collector can read it (or "" to clear): a mistyped key path otherwise
    surfaces only when a probe or a post-mortem fails, after a freeze."""
    if not path:
        return path
    if not os.path.exists(path):
        why = "does not exist"
    elif not os.path.isfile(path):
        why = "is not a file"
    elif not os.access(path, os.R_OK):
        why = "cannot be read by this user"
    else:
        return path
    raise BadRequest(f"SSH key file {path} {why} (on the collector's machine)")


def parse_ssh_spec(spec: str) -> tuple[str, str, int]:
    """``user@addr[:port]`` (``user@[v6addr]:port`` for IPv6) → (user, addr, port)."""
    user, sep, rest = spec.partition("@")
    if not sep or not user or not rest:
        raise BadRequest(f"ssh must look like user@host[:port], not {spec!r}")
    port_text = "22"
    if rest.startswith("["):
        addr, _, tail = rest[1:].partition("]")
        if tail:
            port_text = tail.removeprefix(":") if tail.startswith(":") else "?"
    elif rest.count(":") == 1:
        addr, _, port_text = rest.partition(":")
    else:
        addr = rest
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise BadRequest(f"ssh port must be 1..65535 in {spec!r}")
    if (
        not addr
        or len(addr) > 255
        or len(user) > 64
        or "\x00" in spec
        or any(c.isspace() for c in spec)
    ):
        raise BadRequest(f"bad ssh address in {spec!r}")
    return user, addr, int(port_text)


def _valid(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A check raising BadRequest as a pydantic validator (its message a 422's)."""

    def validate(value: Any) -> Any:
        if value is None or value == "":
            return value
        try:
            check(value)
        except BadRequest as exc:
            raise ValueError(exc.detail) from None
        return value

    return validate


Text = Annotated[str, Field(max_length=4096, pattern=r"^[^\x00]*$")]


class HostPatch(InModel):
    """PATCH /api/v1/hosts/{name}: only the fields sent change; an empty string clears a text
    field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    ssh: Annotated[str | None, AfterValidator(_valid(parse_ssh_spec))] = Field(
        None, max_length=330, description="user@addr[:port]; empty clears it"
    )
    ssh_key_path: Text | None = None
    ssh_host_key: Text | None = Field(None, description="stored host key line, ssh-ed25519 AAAA…")
    trust_host_key: bool = Field(False, description="fetch and store the current host key (TOFU)")
    vllm_url: Text | None = None
    grace_s: Annotated[float | None, AfterValidator(_valid(check_grace))] = Field(
        None,
        ge=0,
        le=GRACE_MAX_S,
        description=f"0 = the collector default, else {GRACE_MIN_S:g}..{GRACE_MAX_S:g} s",
    )
    restart_agent: bool | None = None
    paused: bool | None = None
    netconsole_from: list[str] | None = Field(None, max_length=32)
    retention: dict[RetentionKind, float | None] | None = Field(
        None,
        description="days kept per kind (samples, rollups, lines, kernel_lines, kernel_events, "
        "events, incidents); 0 keeps until deleted, null returns a kind to the default",
    )
    labels: dict[str, str | None] | None = Field(
        None,
        max_length=MAX_LABELS,
        description='labels to set (key: value) or remove (key: null), e.g. {"lab": "a"}',
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str | None] | None) -> dict[str, str | None] | None:
        return None if value is None else check_changes(value)

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: dict[str, float | None] | None) -> dict[str, float | None] | None:
        for kind, days in (value or {}).items():
            if days is not None and not 0 <= days <= RETENTION_MAX_DAYS:
                raise ValueError(f"retention of {kind} must be 0..{RETENTION_MAX_DAYS:g} days")
        return value

    @field_validator("netconsole_from")
    @classmethod
    def _addresses(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        out: list[str] = []
        for addr in value:
            normalized = normalize_addr(addr)  # ValueError → 422
            if normalized not in out:
                out.append(normalized)
        return out


class PowerControl(BaseModel):
    """A hook for hosts that never come back by themselves (a DGX Spark has no BMC): ``cycle``
    runs on the collector host (a smart-plug call, ``ipmitool chassis power cycle``, a script)
    once a matrix campaign has waited ``after_s`` for the host."""

    model_config = ConfigDict(extra="forbid")
    cycle: list[str] = Field(min_length=1)
    after_s: float = Field(300.0, gt=0)
    timeout_s: float = Field(60.0, gt=0)


def set_retention(session: Session, *, host: Host, changes: dict[str, float | None]) -> None:
    """Change the host's own retention per kind (None: back to the collector's default)."""
    current = dict(host.retention or {})
    for kind, days in changes.items():
        if days is None:
            current.pop(kind, None)
        else:
            current[kind] = float(days)
    host.retention = current or None
    session.flush()


def set_power(session: Session, *, host: Host, power: PowerControl | None) -> None:
    """Set (or with None remove) the host's power-cycle hook."""
    host.power = power.model_dump() if power is not None else None
    session.flush()


def configure_host(
    session: Session,
    *,
    host: Host,
    fetch_key: KeyFetcher,
    ssh: str | None = None,
    key_path: str | None = None,
    host_key: str | None = None,
    trust_host_key: bool = False,
    vllm_url: str | None = None,
    grace_s: float | None = None,
    restart_agent: bool | None = None,
) -> dict[str, Any]:
    """Apply the given changes; returns facts worth telling the operator (fingerprint)."""
    facts: dict[str, Any] = {}
    if ssh == "":
        host.ssh_user = host.ssh_host = host.ssh_host_key = None
    elif ssh is not None:
        user, addr, port = parse_ssh_spec(ssh)
        if (addr, port) != (host.ssh_host, host.ssh_port):
            host.ssh_host_key = None  # a new address needs its key trusted again
        host.ssh_user, host.ssh_host, host.ssh_port = user, addr, port
    if key_path is not None:
        host.ssh_key_path = check_key_path(key_path) or None
    if host_key is not None:
        host.ssh_host_key = host_key or None
    if trust_host_key:
        if not host.ssh_host:
            raise BadRequest("--trust-host-key needs --ssh")
        try:
            line, fingerprint = fetch_key(host.ssh_host, host.ssh_port, 5.0)
        except Exception as exc:
            raise BadRequest(f"cannot fetch the host key of {host.ssh_host}: {exc}") from exc
        host.ssh_host_key = line
        facts["host_key_fingerprint"] = fingerprint
        log.warning("host %s: trusting host key %s on first use", host.name, fingerprint)
    if vllm_url is not None:
        host.vllm_url = vllm_url or None
    if grace_s is not None:
        host.grace_s = check_grace(grace_s) or None
    if restart_agent is not None:
        host.restart_agent = restart_agent
    session.flush()
    return facts


class HostConfigOut(OutModel):
    """A host's settings as the API shows them (``ssh`` as ``user@addr:port``)."""

    ssh: str | None
    ssh_key_path: str | None
    ssh_host_key: str | None
    vllm_url: str | None
    grace_s: float | None
    restart_agent: bool
    paused: bool
    # The power-cycle hook for matrix campaigns: {"cycle": [argv...], "after_s": s}.
    power: dict[str, Any] | None
    # This host's own days per kind (``PATCH {"retention": ...}``); the rest follow the defaults.
    retention: dict[str, float]

    @classmethod
    def of(cls, host: Host) -> HostConfigOut:
        return cls.model_validate(
            {
                "ssh": f"{host.ssh_user}@{host.ssh_host}:{host.ssh_port}"
                if host.ssh_host
                else None,
                "ssh_key_path": host.ssh_key_path,
                "ssh_host_key": host.ssh_host_key,
                "vllm_url": host.vllm_url,
                "grace_s": host.grace_s,
                "restart_agent": host.restart_agent,
                "paused": host.paused,
                "power": host.power,
                "retention": dict(host.retention or {}),
            }
        )
