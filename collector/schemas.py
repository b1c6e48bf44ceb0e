"""Pydantic models at the edges: the ingest batch (validated whole before any write) and the
base of every response shape (each domain declares its own next to the query behind it)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo

from agent.wire import EVENT_KINDS, LINE_SOURCES, MAX_LINE_BYTES

LineSource = Literal[LINE_SOURCES]  # type: ignore[valid-type]
EventKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]

Seq = Field(ge=0, le=2**63 - 1)
Ts = Field(ge=0, le=1e11)


class AgentInfo(BaseModel):
    version: str = Field(max_length=64)
    pid: int | None = None
    started_at: float | None = None
    # The sender's current boot; absent from older agents (then it is the batch's boot).
    boot_id: str | None = Field(None, min_length=1, max_length=64)
    # The sender's wall clock at this POST: the clock offset is measured from it.
    sent_at: float | None = Field(None, ge=0, le=1e11)


class Backlog(BaseModel):
    """What the sender's spool still holds after this batch."""

    bytes: int = Field(ge=0)


def first_entry(value: Any) -> dict[str, Any]:
    """The first device of a sample's ``gpu`` or ``vllm`` part (a dict or a list of them), as
    the one the typed columns and the overview show; {} when there is none."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else {}


def number(value: Any) -> int | float | None:
    """``value`` if it is a real number (not a bool), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def scalar(value: Any) -> str | int | float | bool | None:
    """``value`` if it is a JSON scalar, else None."""
    return value if isinstance(value, str | int | float | bool) else None


def listed(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def mapped(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


# What an agent reported inside the free-form parts of a sample or event: read back as the type
# it should have, or null (empty) when it is something else (bad data never fails a read).
ReportedNumber = Annotated[int | float | None, BeforeValidator(number)]
ReportedScalar = Annotated[str | int | float | bool | None, BeforeValidator(scalar)]
ReportedList = Annotated[list[ReportedScalar], BeforeValidator(listed)]
ReportedObject = Annotated[dict[str, Any], BeforeValidator(mapped)]


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

    def first_gpu(self) -> dict[str, Any]:
        return first_entry(self.gpu)

    def first_vllm(self) -> dict[str, Any]:
        return first_entry(self.vllm)


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
        return truncate_line(self.text)


def truncate_line(text: str) -> tuple[str, bool]:
    """Lines over MAX_LINE_BYTES are cut at a character boundary and flagged, not dropped."""
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
    """One POST from an agent; ``sender_boot_id`` is the boot its heartbeat speaks for."""

    host: str = Field(min_length=1, max_length=255)
    boot_id: str = Field(min_length=1, max_length=64)
    agent: AgentInfo
    samples: list[WireSample] = Field(default_factory=list)
    lines: list[WireLine] = Field(default_factory=list)
    events: list[WireEvent] = Field(default_factory=list)
    backlog: Backlog | None = None

    @property
    def sender_boot_id(self) -> str:
        return self.agent.boot_id or self.boot_id


class OutModel(BaseModel):
    """A response shape (API, alert payloads, stored snapshots): built from an ORM row by
    attribute where the names match, else by its own ``of`` classmethod."""

    model_config = ConfigDict(from_attributes=True)


def _epoch(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


# An instant as epoch seconds; a stored (UTC-aware) datetime converts on the way in.
Epoch = Annotated[float, BeforeValidator(_epoch)]

_OFFSET = "clock_offset_s"


def on_collector_clock(offset: float) -> dict[str, float]:
    """The validation context that moves ``AgentTime`` fields by a host's clock offset
    (``collector.readback.timebase.offset_s``): pass it as ``context=`` when validating."""
    return {_OFFSET: offset}


def _to_collector_clock(value: float | None, info: ValidationInfo) -> float | None:
    offset = (info.context or {}).get(_OFFSET, 0.0)
    return value + offset if value is not None and offset else value


# A record time the agent's clock stamped, moved to the collector's time base when validated
# with ``on_collector_clock`` (the host views' one time base); as stamped without it (alerts,
# snapshots). A model instance passed in is not validated again, so it is never moved twice.
AgentTime = Annotated[float, AfterValidator(_to_collector_clock)]


class StreamCounts(BaseModel):
    samples: int = 0
    lines: int = 0
    events: int = 0


class IngestResult(BaseModel):
    stored: StreamCounts
    duplicates: StreamCounts
    resume: dict[str, int | None]
