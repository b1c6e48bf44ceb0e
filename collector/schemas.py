"""Pydantic models at the edges: the ingest batch (validated whole before any write) and the
base of every response shape (each domain declares its own next to the query behind it)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)
from typing_extensions import NotRequired, TypedDict

from agent.wire import EVENT_KINDS, LINE_SOURCES, MAX_LINE_BYTES
from collector.models import INT32_MAX, INT64_MAX

LineSource = Literal[LINE_SOURCES]  # type: ignore[valid-type]
EventKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]

Seq = Field(ge=0, le=INT64_MAX)
Ts = Field(ge=0, le=1e11, allow_inf_nan=False)
# Printable identifiers (boot id, agent version): no NUL, no control characters.
Ident = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")]
# A number a 64-bit column holds: integers in range, floats finite (NaN, Infinity, 1e400: 422).
Float64 = Annotated[float, Field(allow_inf_nan=False)]


def _in_int64(value: float) -> float:
    # Compared in Python: a float bound would round 2**63 - 1 up to 2**63.
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ValueError("out of 64-bit integer range")
    return value


# A memory figure for a BIGINT column: an integer (or finite float) within 64 bits.
MemValue = Annotated[int | Float64, AfterValidator(_in_int64)]


def check_json(value: Any, where: str = "") -> Any:
    """``value`` if every number in it fits 64 bits and is finite and no string or key holds
    a NUL (only a line's text may: it is escaped, see ``escape_nul``); else ValueError."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise ValueError(f"integer out of 64-bit range at {where or 'value'}")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number at {where or 'value'}")
    elif isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"NUL character at {where or 'value'}")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_json(key, f"{where}/{key!r}")
            check_json(item, f"{where}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_json(item, f"{where}/{i}")
    return value


Json = Annotated[Any, AfterValidator(check_json)]
JsonDict = Annotated[dict[str, Any], AfterValidator(check_json)]


class InModel(BaseModel):
    """A request body (API, settings): no NUL in any string or key and no non-finite or
    64-bit-overflowing number anywhere in it, else a 422 saying where (PostgreSQL's text
    cannot hold a NUL; a column cannot hold the rest)."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        return check_json(data)


def escape_nul(text: str) -> str:
    """A line's text without NUL, losslessly: backslash doubled, NUL as ``\\x00`` (the
    line is flagged ``escaped``; PostgreSQL text cannot hold a NUL, SQLite would)."""
    return text.replace("\\", "\\\\").replace("\x00", "\\x00")


def unescape_nul(text: str) -> str:
    """The original text of an ``escaped`` line."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("\\\\", i):
            out.append("\\")
            i += 2
        elif text.startswith("\\x00", i):
            out.append("\x00")
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class AgentInfo(BaseModel):
    version: str = Field(max_length=64, pattern=r"^[^\x00-\x1f\x7f]*$")
    pid: int | None = Field(None, ge=0, le=INT32_MAX)
    started_at: float | None = Field(None, ge=0, le=1e11, allow_inf_nan=False)
    # The sender's current boot; absent from older agents (then it is the batch's boot).
    boot_id: Ident | None = None
    # The sender's wall clock at this POST: the clock offset is measured from it.
    sent_at: float | None = Field(None, ge=0, le=1e11, allow_inf_nan=False)


class Backlog(BaseModel):
    """What the sender's spool still holds after this batch."""

    bytes: int = Field(ge=0, le=INT64_MAX)


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
    mem: dict[str, MemValue | None] = Field(default_factory=dict)
    psi: JsonDict | None = None
    vmstat: dict[str, Float64 | None] | None = None
    load: dict[str, Float64 | None] | None = None
    gpu: JsonDict | list[JsonDict] | None = None
    vllm: list[JsonDict] | None = None

    @model_validator(mode="after")
    def _extras(self) -> WireSample:
        check_json(self.__pydantic_extra__ or {})
        return self

    def first_gpu(self) -> dict[str, Any]:
        return first_entry(self.gpu)

    def first_vllm(self) -> dict[str, Any]:
        return first_entry(self.vllm)


class WireLine(TypedDict):
    """A line of a batch: a validated dict (an optional key absent reads None with ``get``).
    Not a model or a dataclass: a batch holds up to thousands of lines, and pydantic builds a
    dict at two thirds of a dataclass instance's cost, which was a third of validating a
    1,000-line batch (0.81 against 1.27 ms). Unknown keys are dropped, as before."""

    seq: Annotated[int, Seq]
    ts: Annotated[float, Ts]
    source: LineSource
    text: str
    priority: NotRequired[Annotated[int | None, Field(ge=0, le=7)]]
    facility: NotRequired[Annotated[int | None, Field(ge=0, le=127)]]
    kseq: NotRequired[Annotated[int | None, Field(ge=0, le=INT64_MAX)]]
    fields: NotRequired[JsonDict | None]


# A text of at most this many characters fits MAX_LINE_BYTES whatever they are (UTF-8 takes
# at most 4 bytes a character): it needs no encoding to be measured.
FITS_CHARS = MAX_LINE_BYTES // 4


def truncate_line(text: str) -> tuple[str, bool]:
    """Lines over MAX_LINE_BYTES are cut at a character boundary and flagged, not dropped."""
    if len(text) <= FITS_CHARS:
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_LINE_BYTES:
        return text, False
    return raw[:MAX_LINE_BYTES].decode("utf-8", "ignore"), True


class WireEvent(BaseModel):
    seq: int = Seq
    ts: float = Ts
    kind: EventKind
    data: JsonDict = Field(default_factory=dict)


class Batch(BaseModel):
    """One POST from an agent; ``sender_boot_id`` is the boot its heartbeat speaks for."""

    host: str = Field(min_length=1, max_length=255)
    boot_id: Ident
    agent: AgentInfo
    samples: list[WireSample] = Field(default_factory=list)
    lines: list[WireLine] = Field(default_factory=list)
    events: list[WireEvent] = Field(default_factory=list)
    backlog: Backlog | None = None
    # Positions in ``lines`` of the texts that had a NUL, now escaped (``escape_nul``).
    _escaped: frozenset[int] = PrivateAttr(frozenset())

    @model_validator(mode="after")
    def _no_nul(self) -> Batch:
        """No NUL goes past validation (PostgreSQL text cannot hold one): checked here once a
        batch, as a validator and a private attribute per line cost a fifth of ingest's CPU."""
        escaped = [i for i, line in enumerate(self.lines) if "\x00" in line["text"]]
        for i in escaped:
            self.lines[i]["text"] = escape_nul(self.lines[i]["text"])
        if escaped:
            self._escaped = frozenset(escaped)
        return self

    @property
    def sender_boot_id(self) -> str:
        return self.agent.boot_id or self.boot_id

    @property
    def escaped_lines(self) -> frozenset[int]:
        """Positions in ``lines`` of the texts that had a NUL and are stored escaped. (Read it
        once a batch: a pydantic private attribute is a slow lookup.)"""
        return self._escaped


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
