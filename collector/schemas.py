"""Pydantic models at the edges: the ingest batch (validated whole before any write) and
API responses."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.wire import EVENT_KINDS, LINE_SOURCES, MAX_LINE_BYTES

LineSource = Literal[LINE_SOURCES]  # type: ignore[valid-type]
EventKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]

Seq = Field(ge=0, le=2**63 - 1)
Ts = Field(ge=0, le=1e11)


class AgentInfo(BaseModel):
    version: str = Field(max_length=64)
    pid: int | None = None
    started_at: float | None = None
    # The boot the agent runs in; differs from the batch's boot_id for a catch-up batch.
    boot_id: str | None = Field(None, max_length=64)


class WireSample(BaseModel):
    model_config = ConfigDict(extra="allow")
    seq: int = Seq
    ts: float = Ts
    burst: bool = False
    mem: dict[str, int | float | None] = Field(default_factory=dict)
    psi: dict[str, Any] | None = None
    vmstat: dict[str, float | None] | None = None
    load: dict[str, float | None] | None = None
    gpu: dict[str, Any] | list[dict[str, Any]] | None = None
    vllm: list[dict[str, Any]] | None = None


class WireLine(BaseModel):
    seq: int = Seq
    ts: float = Ts
    source: LineSource
    priority: int | None = Field(None, ge=0, le=7)
    facility: int | None = Field(None, ge=0, le=127)
    kseq: int | None = Field(None, ge=0)
    text: str
    fields: dict[str, Any] | None = None

    def truncated_text(self) -> tuple[str, bool]:
        """Lines over MAX_LINE_BYTES are cut at a character boundary and flagged, not dropped."""
        text = self.text
        if len(text) * 4 <= MAX_LINE_BYTES:  # cheap path: cannot exceed the byte limit
            return text, False
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) <= MAX_LINE_BYTES:
            return text, False
        return raw[:MAX_LINE_BYTES].decode("utf-8", "ignore"), True


class WireEvent(BaseModel):
    seq: int = Seq
    ts: float = Ts
    kind: EventKind
    data: dict[str, Any] = Field(default_factory=dict)


class Batch(BaseModel):
    host: str = Field(min_length=1, max_length=255)
    boot_id: str = Field(min_length=1, max_length=64)
    agent: AgentInfo
    samples: list[WireSample] = Field(default_factory=list)
    lines: list[WireLine] = Field(default_factory=list)
    events: list[WireEvent] = Field(default_factory=list)


class StreamCounts(BaseModel):
    samples: int = 0
    lines: int = 0
    events: int = 0


class IngestResult(BaseModel):
    stored: StreamCounts
    duplicates: StreamCounts
    resume: dict[str, int | None]


class HostPatch(BaseModel):
    """PATCH /api/v1/hosts/{name}: only the fields sent change; an empty string clears a text
    field."""

    model_config = ConfigDict(extra="forbid")
    ssh: str | None = Field(None, description="user@addr[:port]; empty clears it")
    ssh_key_path: str | None = None
    ssh_host_key: str | None = Field(None, description="stored host key line, ssh-ed25519 AAAA…")
    trust_host_key: bool = Field(False, description="fetch and store the current host key (TOFU)")
    vllm_url: str | None = None
    grace_s: float | None = Field(None, ge=0, description="0 = the collector default")
    restart_agent: bool | None = None
    paused: bool | None = None
    netconsole_from: list[str] | None = Field(None, max_length=32)

    @field_validator("netconsole_from")
    @classmethod
    def _addresses(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        import ipaddress

        out: list[str] = []
        for addr in value:
            ip = ipaddress.ip_address(addr.strip())  # ValueError → 422
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            if str(ip) not in out:
                out.append(str(ip))
        return out
