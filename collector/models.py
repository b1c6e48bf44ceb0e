"""The schema. Entity timestamps are UTC datetimes; time-series rows keep epoch seconds
(``ts`` from the agent's clock, ``received_at`` from ours) so bucketing is plain arithmetic on
both SQLite and PostgreSQL."""

from __future__ import annotations

import sys
from datetime import datetime
from enum import Enum
from typing import Any, cast
from weakref import WeakKeyDictionary

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    false,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, object_session
from sqlalchemy.orm.attributes import instance_dict

# Re-exported: the collector names them through its models.
from agent.kernel.event import KernelAction as KernelAction
from agent.kernel.event import Severity as Severity
from collector.packing import Template, header, unpack
from collector.timeutil import UTCDateTime, utcnow

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # the collector also runs on 3.10, where StrEnum is missing

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)


class HostStatus(StrEnum):
    """Liveness on the collector's clock; changed only by ``collector.liveness.status``."""

    UNKNOWN = "unknown"
    UP = "up"
    LATE = "late"
    LOST = "lost"  # an incident is open
    STOPPED = "stopped"  # the agent announced its stop
    PAUSED = "paused"  # silenced for maintenance


class IncidentKind(StrEnum):
    UNREACHABLE = "unreachable"
    AGENT_DOWN = "agent_down"
    PLANNED = "planned"
    PAUSED = "paused"


class IncidentState(StrEnum):
    """open → resolving (host back, replay settling) → resolved; see incidents.lifecycle."""

    OPEN = "open"
    RESOLVING = "resolving"
    RESOLVED = "resolved"


class Resolution(StrEnum):
    REBOOTED = "rebooted"
    PLANNED_REBOOT = "planned_reboot"
    AGENT_RECOVERED = "agent_recovered"
    NETWORK_PARTITION = "network_partition"
    STALL = "stall"
    RETURNED = "returned"
    UNPAUSED = "unpaused"


class PostmortemState(StrEnum):
    NONE = "none"
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class DeliveryState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"  # gave up after the retry window


class RunStatus(StrEnum):
    """queued → running → succeeded | failed | cancelled | interrupted."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


class StepOutcome(StrEnum):
    """How a matrix step ended (``MatrixStep.outcome``)."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    HOST_FROZE = "host_froze"  # an incident opened on the run's host during the step
    INTERRUPTED = "interrupted"  # the collector stopped (SIGTERM, kill -9) during the step


# Incidents of these kinds are announced silences: never alerted.
SILENT_KINDS = (IncidentKind.PLANNED, IncidentKind.PAUSED)
UNRESOLVED = (IncidentState.OPEN, IncidentState.RESOLVING)
ACTIVE_RUNS = (RunStatus.QUEUED, RunStatus.RUNNING)

# SQLite only auto-increments an INTEGER PRIMARY KEY.
# What integer columns hold: a wire value beyond them is a 422, one parsed out of text is None.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def fits(value: object, bits: int = 64) -> int | None:
    """``value`` as an integer column of ``bits`` holds it, else None (also for non-integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    limit = 2 ** (bits - 1)
    return int(value) if -limit <= value < limit else None


BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


def table_of(model: type[Base]) -> Table:
    """A model's table, typed as one (``__table__`` is typed as any FromClause)."""
    return cast(Table, model.__table__)


class Meta(Base):
    """Collector-wide secrets and facts (admin token hash, cookie secret)."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class UiSession(Base):
    """A browser's login: the UI cookie holds its id (only the hash is kept), valid until
    ``expires_at``, logout, or a new admin token (``admin_hash`` is the one it was opened with)."""

    __tablename__ = "ui_sessions"
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    admin_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]


# What retention prunes, oldest first (see collector.retention): raw 1 s samples, their minute
# rollups, log lines, kernel lines at priority <= KERNEL_KEEP_PRIORITY (kept longer), classified
# kernel events, agent and collector events, and resolved incidents with their evidence. Matrix
# runs are kept until deleted.
RETENTION_KINDS = (
    "samples", "rollups", "lines", "kernel_lines", "kernel_events", "events", "incidents",
)  # fmt: skip
KERNEL_KEEP_PRIORITY = 3


class Host(Base):
    __tablename__ = "hosts"
    __table_args__ = (Index("ix_hosts_overdue_at", "overdue_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)

    # Liveness, always from the collector's clock.
    status: Mapped[str] = mapped_column(String(16), default=HostStatus.UNKNOWN)
    status_since: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime | None]
    overdue_at: Mapped[datetime | None]
    grace_s: Mapped[float | None] = mapped_column(Float)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    current_boot_id: Mapped[str | None] = mapped_column(String(64))
    agent_version: Mapped[str | None] = mapped_column(String(64))
    agent_pid: Mapped[int | None] = mapped_column(Integer)
    agent_started_at: Mapped[float | None] = mapped_column(Float)
    # What the agent's spool still held after its latest batch (None: an agent that does not
    # say), and its clock's offset (our receive time - its send time, smoothed), seconds.
    backlog_bytes: Mapped[int | None] = mapped_column(BigInteger)
    clock_offset_s: Mapped[float | None] = mapped_column(Float)

    # How the collector reaches the host on its own (probes, post-mortem, matrix runs).
    ssh_user: Mapped[str | None] = mapped_column(String(64))
    ssh_host: Mapped[str | None] = mapped_column(String(255))
    ssh_port: Mapped[int] = mapped_column(Integer, default=22)
    ssh_key_path: Mapped[str | None] = mapped_column(Text)
    ssh_host_key: Mapped[str | None] = mapped_column(Text)
    vllm_url: Mapped[str | None] = mapped_column(Text)
    restart_agent: Mapped[bool] = mapped_column(Boolean, default=False)
    netconsole_from: Mapped[list[str]] = mapped_column(JSON, default=list)
    # {"cycle": [argv run on the collector host], "after_s": ..., "timeout_s": ...}; set by
    # `add-host --power-cycle` only (an admin token must not grant a shell on the collector).
    power: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    # The agent's guard as the agent last reported it (``agent_started`` data ``guard``), on the
    # agent's clock; null until an agent that knows the guard said (state: agent.wire.GUARD_STATES).
    guard_state: Mapped[str | None] = mapped_column(String(16))
    guard: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    guard_reported_at: Mapped[float | None] = mapped_column(Float)
    # Days to keep each RETENTION_KINDS kind of this host's data, where it differs from the
    # collector's FREEZEWATCH_RETAIN_* defaults (0: kept until deleted); null: the defaults.
    retention: Mapped[dict[str, float] | None] = mapped_column(JSON)
    # key=value pairs to group and filter hosts by (``collector.hosts.labels``); null: none.
    labels: Mapped[dict[str, str] | None] = mapped_column(JSON)


class Boot(Base):
    __tablename__ = "boots"
    __table_args__ = (UniqueConstraint("host_id", "boot_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    boot_id: Mapped[str] = mapped_column(String(64))
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class SampleTemplate(Base):
    """The first sample of one shape from one host in a day (``collector.packing``): the keys
    and the values its rows leave out. Written once, never changed or deleted, so an id always
    means the same template (ids are never reused) and any process may cache it."""

    __tablename__ = "sample_templates"
    __table_args__ = (UniqueConstraint("host_id", "digest"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The host it was made for (no foreign key: it outlives a deleted host, see above).
    host_id: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(32))  # packing.shape_digest: shape and day
    body: Mapped[bytes] = mapped_column(LargeBinary)  # packing.Template.body
    created_at: Mapped[float] = mapped_column(Float)


# Per database, templates by id: shared by the process's sessions (a template never changes).
_TEMPLATES: WeakKeyDictionary[Engine, dict[int, Template]] = WeakKeyDictionary()
_TEMPLATES_KEPT = 4096


def engine_of(session: Session) -> Engine:
    """The engine a session's rows come from (the key of per-database caches)."""
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine


def remember_template(session: Session, template_id: int, template: Template) -> None:
    """Cache a committed template of the session's database (``template_of`` reads it)."""
    cache = _TEMPLATES.setdefault(engine_of(session), {})
    if len(cache) >= _TEMPLATES_KEPT:
        cache.clear()
    cache[template_id] = template


def template_of(session: Session, template_id: int) -> Template:
    """The template ``template_id``, cached or read through ``session``."""
    template = _TEMPLATES.get(engine_of(session), {}).get(template_id)
    if template is not None:
        return template
    row = session.get(SampleTemplate, template_id)
    if row is None:
        raise LookupError(f"sample template {template_id} is not stored")
    template = Template.from_body(row.body)
    remember_template(session, template_id, template)
    return template


class Sample(Base):
    """One host sample: the charted metrics typed, the whole sample packed (``data`` unpacks
    it). Keyed by (boot, seq), the agent's record identity; no surrogate id, whose sequence
    and index would cost more than the packed sample itself."""

    __tablename__ = "samples"
    __table_args__ = (
        PrimaryKeyConstraint("boot_pk", "seq"),
        # A host's samples arrive in key order: full index pages (the PK's too, see 0017).
        Index("ix_samples_host_ts", "host_id", "ts", postgresql_with={"fillfactor": 100}),
    )

    # No foreign keys on time-series rows: PostgreSQL checks them with a trigger per row,
    # which costs more than the insert itself; hosts.delete_host removes a host's rows.
    # Column order: 8-byte columns first, so PostgreSQL pads none of them.
    host_id: Mapped[int] = mapped_column(Integer)
    boot_pk: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    mem_total: Mapped[int | None] = mapped_column(BigInteger)
    mem_available: Mapped[int | None] = mapped_column(BigInteger)
    mem_free: Mapped[int | None] = mapped_column(BigInteger)
    swap_used: Mapped[int | None] = mapped_column(BigInteger)
    gpu_mem_used: Mapped[int | None] = mapped_column(BigInteger)
    psi_mem_some_avg10: Mapped[float | None] = mapped_column(Float)
    psi_mem_full_avg10: Mapped[float | None] = mapped_column(Float)
    psi_cpu_some_avg10: Mapped[float | None] = mapped_column(Float)
    psi_io_some_avg10: Mapped[float | None] = mapped_column(Float)
    psi_io_full_avg10: Mapped[float | None] = mapped_column(Float)
    gpu_util: Mapped[float | None] = mapped_column(Float)
    vllm_running: Mapped[float | None] = mapped_column(Float)
    vllm_waiting: Mapped[float | None] = mapped_column(Float)
    vllm_kv_usage: Mapped[float | None] = mapped_column(Float)
    # The agent's whole sample less the typed values (``collector.packing``); its first bytes
    # hold the burst flag and the template's id.
    packed: Mapped[bytes] = mapped_column(LargeBinary)

    @property
    def burst(self) -> bool:
        """Sampled faster than the interval (the agent's pressure burst)."""
        return header(self.packed)[0]

    @property
    def template_id(self) -> int | None:
        """The template ``packed`` leaves out (None: stored plain)."""
        return header(self.packed)[1]

    @property
    def data(self) -> dict[str, Any]:
        """The agent's whole sample, as it sent it (less ``seq``, ``ts``, ``burst``, nulls)."""
        cached: dict[str, Any] | None = self.__dict__.get("_data")
        if cached is None:
            template: Template | None = self.__dict__.get("_template")
            template_id = self.template_id
            if template is None and template_id is not None:
                session = object_session(self)
                if session is None:
                    raise LookupError(f"sample template {template_id}: the row has no session")
                template = template_of(session, template_id)
            known = {n: getattr(self, n) for n in set(template.known.values())} if template else {}
            cached = unpack(self.packed, template, known)
            self.__dict__["_data"] = cached
        return cached

    def fields(self) -> dict[str, Any]:
        """Its loaded columns and what it unpacks to: what ``SampleOut`` shows."""
        unpacked = {"burst": self.burst, "data": self.data, "load1": self.load1}
        return instance_dict(self) | unpacked | {"gpu_power_w": self.gpu_power_w}

    @property
    def load1(self) -> float | None:
        """The 1-minute load average (not charted, so not a column)."""
        value = (self.data.get("load") or {}).get("1")
        return value if _is_number(value) else None

    @property
    def gpu_power_w(self) -> float | None:
        """The first GPU's power draw (not charted, so not a column)."""
        gpu = self.data.get("gpu")
        first = gpu[0] if isinstance(gpu, list) and gpu else gpu
        value = first.get("power_w") if isinstance(first, dict) else None
        return value if _is_number(value) else None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@event.listens_for(Sample, "load")
@event.listens_for(Sample, "refresh")
def _attach_template(target: Sample, context: Any, *_: Any) -> None:
    """Give a loaded sample its template now, while it has a session: ``data`` then unpacks
    after the session has closed too."""
    target.__dict__.pop("_data", None)
    packed = target.__dict__.get("packed")
    template_id = header(packed)[1] if packed else None
    if template_id is not None:
        target.__dict__["_template"] = template_of(context.session, template_id)


# vLLM's own lines among a host's kernel storm: kernel-event correlation and the vLLM
# parser read them by time, and the (host, ts) index would walk every line of the window.
# Partial, so other lines pay nothing.
VLLM_LINES_WHERE = "source = 'vllm'"
# Line.source values of kernel records (the agent's kmsg reader, the kernel's netconsole).
KERNEL_SOURCES = ("kmsg", "netconsole")


class Line(Base):
    """A log line. Kernel records are unique per (boot, kseq) whichever channel brought them."""

    __tablename__ = "lines"
    __table_args__ = (
        UniqueConstraint("boot_pk", "seq"),
        UniqueConstraint("boot_pk", "kseq"),
        Index("ix_lines_host_ts", "host_id", "ts"),
        Index(
            "ix_lines_vllm_host_ts",
            "host_id",
            "ts",
            sqlite_where=text(VLLM_LINES_WHERE),
            postgresql_where=text(VLLM_LINES_WHERE),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # No foreign keys on time-series rows: PostgreSQL checks them with a trigger per row,
    # which costs more than the insert itself; hosts.delete_host removes a host's rows.
    host_id: Mapped[int] = mapped_column(Integer)
    boot_pk: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int | None] = mapped_column(BigInteger)
    kseq: Mapped[int | None] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int | None] = mapped_column(Integer)
    facility: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    # The text had NUL characters, stored escaped (``collector.schemas.escape_nul``).
    escaped: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    fields: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Which channels brought this record (CHANNEL_* bits) and when each first did.
    channels: Mapped[int] = mapped_column(SmallInteger, default=1, server_default="1")
    agent_received_at: Mapped[float | None] = mapped_column(Float)
    netconsole_received_at: Mapped[float | None] = mapped_column(Float)


class AgentEvent(Base):
    """Agent-side facts: agent_started, spool_dropped, kmsg_overrun, source_error, ..."""

    __tablename__ = "agent_events"
    __table_args__ = (
        UniqueConstraint("boot_pk", "seq"),
        Index("ix_agent_events_host_ts", "host_id", "ts"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # No foreign keys on time-series rows: PostgreSQL checks them with a trigger per row,
    # which costs more than the insert itself; hosts.delete_host removes a host's rows.
    host_id: Mapped[int] = mapped_column(Integer)
    boot_pk: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# The sample columns the UI charts; ``sample_rollups`` keeps their per-minute avg/min/max.
CHARTED_COLUMNS = (
    "mem_total",
    "mem_available",
    "mem_free",
    "swap_used",
    "psi_mem_some_avg10",
    "psi_mem_full_avg10",
    "psi_cpu_some_avg10",
    "psi_io_some_avg10",
    "psi_io_full_avg10",
    "gpu_util",
    "gpu_mem_used",
    "vllm_running",
    "vllm_waiting",
    "vllm_kv_usage",
)
ROLLUP_STEP_S = 60

# Per host and minute (``bucket`` = floor(ts/60)*60): ``n`` samples and, per charted column,
# ``<col>_avg``/``_min``/``_max``. Recomputed from ``samples`` for the minutes each ingest
# touches, so replayed spool data lands in its minute too; wide views read this, not samples.
sample_rollups = Table(
    "sample_rollups",
    Base.metadata,
    Column("host_id", ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True),
    Column("bucket", Float, primary_key=True),
    Column("n", Integer, nullable=False),
    *(Column(f"{name}_{agg}", Float) for name in CHARTED_COLUMNS for agg in ("avg", "min", "max")),
)


class MatrixSchedule(Base):
    """A spec with a cron `schedule` (soak runs): each firing queues a run of the spec."""

    __tablename__ = "matrix_schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    cron: Mapped[str] = mapped_column(String(255))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    preset: Mapped[str | None] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class MatrixRun(Base):
    """One matrix run: the validated spec, its lifecycle and (once built) its report.

    status: queued → running → succeeded | failed | cancelled; a run left `running` by a
    collector that stopped is taken over by the next one (see ``matrix.durable``), and ends
    `interrupted` only when it cannot go on.
    """

    __tablename__ = "matrix_runs"
    __table_args__ = (Index("ix_matrix_runs_status", "status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    preset: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    # One JSONL record per workload request, under the collector's data dir.
    requests_path: Mapped[str | None] = mapped_column(Text)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    schedule_id: Mapped[int | None] = mapped_column(
        ForeignKey("matrix_schedules.id", ondelete="SET NULL")
    )
    # Only one collector process drives a run: the one holding an unexpired lease.
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None]
    # Remote process groups started and not yet ended: [{"pgid", "boot_id", "step_id"}], so a
    # collector restarted after kill -9 kills them (on the same boot only).
    remote_groups: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # What happened to the campaign beyond its steps: freezes, power cycles, resumes.
    events: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)


class MatrixStep(Base):
    """One step of a run (stop, start, health, workload, stop) with its window and outcome."""

    __tablename__ = "matrix_steps"
    __table_args__ = (Index("ix_matrix_steps_run_id", "run_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("matrix_runs.id", ondelete="CASCADE"))
    profile: Mapped[str] = mapped_column(String(255))
    repetition: Mapped[int] = mapped_column(Integer, default=1)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    outcome: Mapped[str | None] = mapped_column(String(16))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# Line.channels bits: the agent's HTTP stream (kmsg reader) and the kernel's own netconsole.
CHANNEL_AGENT = 1
CHANNEL_NETCONSOLE = 2


class NetconsoleDatagram(Base):
    """Every allowlisted netconsole datagram as received, stored before it is parsed.

    Kept ``netconsole_keep_days`` (pruned by the receiver): the evidence if parsing or
    reassembly got a burst wrong.
    """

    __tablename__ = "netconsole_datagrams"
    __table_args__ = (Index("ix_netconsole_datagrams_received_at", "received_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id", ondelete="SET NULL"))
    source_addr: Mapped[str] = mapped_column(String(64))
    source_port: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[float] = mapped_column(Float)
    raw: Mapped[bytes] = mapped_column(LargeBinary)


class NetconsoleStats(Base):
    """Per-host netconsole counters, bumped in the same transaction as the records they count."""

    __tablename__ = "netconsole_stats"

    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True
    )
    received: Mapped[int] = mapped_column(BigInteger, default=0)  # records (reassembled)
    lost_msgid: Mapped[int] = mapped_column(BigInteger, default=0)  # msgid gaps, net of late
    incomplete: Mapped[int] = mapped_column(BigInteger, default=0)  # fragments never completed
    last_line_at: Mapped[float | None] = mapped_column(Float)


class HostSilence(Base):
    """Why a host may go quiet without it being a freeze: the agent's last ``agent_stopping``."""

    __tablename__ = "host_silences"

    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True
    )
    announced_at: Mapped[datetime]
    shutdown: Mapped[bool] = mapped_column(Boolean, default=False)
    boot_id: Mapped[str | None] = mapped_column(String(64))


class VllmState(Base):
    """A host's vLLM log parser and hang detectors between batches, so that whichever collector
    process stores the next batch continues where the last one stopped (``version`` says
    whether a process's copy in memory is still the latest)."""

    __tablename__ = "vllm_states"

    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, default=0)
    stream: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    hang: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class PlannedReboot(Base):
    """A reboot the collector asked for (a matrix cold boot): the silence it causes is planned
    (no alert) while the host still runs ``boot_id``, the boot it had when asked, and until
    ``expires_at``."""

    __tablename__ = "planned_reboots"

    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True
    )
    requested_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    boot_id: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)


class KernelEventRow(Base):
    """A classified kernel line (issue 4), annotated with what vLLM was doing at that moment."""

    __tablename__ = "kernel_events"
    __table_args__ = (
        UniqueConstraint("line_id"),
        Index("ix_kernel_events_host_ts", "host_id", "ts"),
        Index("ix_kernel_events_occurrence_id", "occurrence_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    boot_pk: Mapped[int] = mapped_column(ForeignKey("boots.id", ondelete="CASCADE"))
    line_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("lines.id", ondelete="CASCADE"))
    ts: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    xid: Mapped[int | None] = mapped_column(Integer)
    pci: Mapped[str | None] = mapped_column(String(32))
    pid: Mapped[int | None] = mapped_column(Integer)
    process: Mapped[str | None] = mapped_column(String(255))
    meaning: Mapped[str | None] = mapped_column(Text)
    nv_err: Mapped[str | None] = mapped_column(String(64))
    call_site: Mapped[str | None] = mapped_column(String(255))
    code: Mapped[str | None] = mapped_column(String(64))
    device: Mapped[str | None] = mapped_column(String(64))
    module: Mapped[str | None] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(
        String(16), default=Severity.ERROR, server_default=Severity.ERROR.value
    )
    action: Mapped[str] = mapped_column(
        String(24), default=KernelAction.NONE, server_default=KernelAction.NONE.value
    )
    occurrence_id: Mapped[int | None] = mapped_column(BigInteger)
    # Correlation: the vLLM phase at ts and the nearest vLLM line within ±2 s (same host).
    vllm_phase: Mapped[str | None] = mapped_column(String(32))
    vllm_line_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("lines.id", ondelete="SET NULL")
    )
    vllm_line_ts: Mapped[float | None] = mapped_column(Float)
    vllm_line: Mapped[str | None] = mapped_column(Text)


class KernelOccurrence(Base):
    """One fault on one host, however often it repeats: (kind, code, device) with a count and
    first/last seen; an Xid storm is one row. '' stands for a code or device the kind lacks."""

    __tablename__ = "kernel_occurrences"
    __table_args__ = (UniqueConstraint("host_id", "kind", "code", "device"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    code: Mapped[str] = mapped_column(String(64))
    device: Mapped[str] = mapped_column(String(64))
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    first_ts: Mapped[float] = mapped_column(Float)
    last_ts: Mapped[float] = mapped_column(Float)
    severity: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(24))
    meaning: Mapped[str | None] = mapped_column(Text)
    boots: Mapped[int] = mapped_column(Integer, default=1)


class KernelOccurrenceBoot(Base):
    """A boot in which an occurrence was seen: the same fatal fault back after reboots."""

    __tablename__ = "kernel_occurrence_boots"

    occurrence_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("kernel_occurrences.id", ondelete="CASCADE"), primary_key=True
    )
    boot_pk: Mapped[int] = mapped_column(
        ForeignKey("boots.id", ondelete="CASCADE"), primary_key=True
    )
    first_ts: Mapped[float] = mapped_column(Float)


class VllmStart(Base):
    """One vLLM server start seen in its log: the startup plan, the outcome, the current phase."""

    __tablename__ = "vllm_starts"
    __table_args__ = (Index("ix_vllm_starts_host_started", "host_id", "started_ts"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    boot_pk: Mapped[int | None] = mapped_column(ForeignKey("boots.id", ondelete="SET NULL"))
    started_ts: Mapped[float] = mapped_column(Float)
    first_line_id: Mapped[int | None] = mapped_column(BigInteger)
    phase: Mapped[str | None] = mapped_column(String(32))
    outcome: Mapped[str] = mapped_column(String(16), default="incomplete")
    error: Mapped[str | None] = mapped_column(Text)
    vllm_version: Mapped[str | None] = mapped_column(String(64))
    model_load_gib: Mapped[float | None] = mapped_column(Float)
    model_load_s: Mapped[float | None] = mapped_column(Float)
    drafter_loaded: Mapped[bool] = mapped_column(Boolean, default=False)
    cuda_graph_estimate_gib: Mapped[float | None] = mapped_column(Float)
    kv_cache_gib: Mapped[float | None] = mapped_column(Float)
    kv_cache_tokens: Mapped[int | None] = mapped_column(BigInteger)
    max_concurrency: Mapped[float | None] = mapped_column(Float)
    max_concurrency_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cuda_graph_pool_actual_gib: Mapped[float | None] = mapped_column(Float)
    cuda_graph_pool_estimated_gib: Mapped[float | None] = mapped_column(Float)
    # The whole plan as the parser has it (including fields beyond the columns).
    plan: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    anomalies: Mapped[list[str]] = mapped_column(JSON, default=list)


class VllmPhase(Base):
    """A phase a vLLM server start entered, and when (its log line's ts)."""

    __tablename__ = "vllm_phases"
    __table_args__ = (
        Index("ix_vllm_phases_host_ts", "host_id", "ts"),
        Index("ix_vllm_phases_start_id", "start_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    start_id: Mapped[int] = mapped_column(ForeignKey("vllm_starts.id", ondelete="CASCADE"))
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    phase: Mapped[str] = mapped_column(String(32))
    ts: Mapped[float] = mapped_column(Float)
    line_id: Mapped[int | None] = mapped_column(BigInteger)


class HostEvent(Base):
    """A collector-side fact about a host: vllm_hung/vllm_resumed, vllm_stats, spec_decode,
    vllm_anomaly; ``data`` holds the fields of its kind."""

    __tablename__ = "host_events"
    __table_args__ = (Index("ix_host_events_host_ts", "host_id", "ts"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    ts: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class CollectorRun(Base):
    """One collector process lifetime; the gap before a run's start is the collector's downtime."""

    __tablename__ = "collector_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime]
    last_alive_at: Mapped[datetime]
    stopped_at: Mapped[datetime | None]
    # The downtime before this run: previous run's last sign of life → started_at.
    down_since: Mapped[datetime | None]
    pid: Mapped[int | None] = mapped_column(Integer)
    # Started while another collector process watched the hosts (a replica, a restart of a
    # standby): no downtime before it, and its start changes nothing for the hosts.
    joined: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # How far behind this process's ingest was at its last sign of life (liveness.backlog).
    ingest_lag_s: Mapped[float | None] = mapped_column(Float)


class Incident(Base):
    """One silence of one host: opened by the checker, resolved when the host returns."""

    __tablename__ = "incidents"
    __table_args__ = (
        Index("ix_incidents_host_opened", "host_id", "opened_at"),
        Index("ix_incidents_state", "state"),
        Index("ix_incidents_postmortem_due", "postmortem_state", "postmortem_due_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))  # IncidentKind
    state: Mapped[str] = mapped_column(String(16), default=IncidentState.OPEN)
    resolution: Mapped[str | None] = mapped_column(String(24))
    last_heartbeat_at: Mapped[datetime | None]
    late_at: Mapped[datetime]
    opened_at: Mapped[datetime]
    returned_at: Mapped[datetime | None]
    resolved_at: Mapped[datetime | None]
    boot_id: Mapped[str | None] = mapped_column(String(64))
    return_boot_id: Mapped[str | None] = mapped_column(String(64))
    # Agent-clock ts of the last sample before the silence: where the replay check starts.
    last_sample_ts: Mapped[float | None] = mapped_column(Float)
    stall_s: Mapped[float | None] = mapped_column(Float)
    shutdown: Mapped[bool] = mapped_column(Boolean, default=False)
    collector_down: Mapped[bool] = mapped_column(Boolean, default=False)
    # The opened alert waits until then (the silence began while the collector was down);
    # resolved before that, the incident never alerts.
    alert_held_until: Mapped[datetime | None]
    probes: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    agent_restart: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    postmortem_state: Mapped[str] = mapped_column(String(16), default=PostmortemState.NONE)
    postmortem_attempts: Mapped[int] = mapped_column(Integer, default=0)
    postmortem_due_at: Mapped[datetime | None]
    # Every use of the host's power-cycle hook during this silence (matrix campaigns).
    power_cycles: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)

    @property
    def silence_start(self) -> datetime:
        """The last heartbeat before the silence, else when the host went late."""
        return self.last_heartbeat_at or self.late_at

    @property
    def silence_end(self) -> datetime | None:
        """When heartbeats returned, else when resolved; None while the host is silent."""
        return self.returned_at or self.resolved_at


class IncidentSnapshot(Base):
    """The last-gasp evidence, copied when the incident opens so it never needs the host back."""

    __tablename__ = "incident_snapshots"

    incident_id: Mapped[int] = mapped_column(
        ForeignKey("incidents.id", ondelete="CASCADE"), primary_key=True
    )
    taken_at: Mapped[datetime]
    window_start: Mapped[float | None] = mapped_column(Float)
    window_end: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    lines: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    context: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Artifact(Base):
    """One post-mortem command's output, size-capped."""

    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("incident_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    argv: Mapped[list[str]] = mapped_column(JSON, default=list)
    stdout: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    stderr: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    exit_status: Mapped[int | None] = mapped_column(Integer)
    duration_s: Mapped[float | None] = mapped_column(Float)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    collected_at: Mapped[datetime] = mapped_column(default=utcnow)
    # pstore files and the previous boot's kernel journal, through the kernel classifier
    kernel_events: Mapped[list[dict[str, Any]]] = mapped_column(
        JSON, default=list, server_default="[]"
    )


class WebhookTarget(Base):
    __tablename__ = "webhook_targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # An http(s) URL for json/slack; an Apprise URL (ntfy://, tgram://, mailto://, ...) for
    # apprise, where the URL itself carries the service's credentials (write-only).
    url: Mapped[str] = mapped_column(Text)
    # json | slack | apprise
    format: Mapped[str] = mapped_column(String(16), default="json")
    secret: Mapped[str | None] = mapped_column(Text)
    # Event patterns this target takes (``incident.*``, ``kernel.event``); None: every event.
    events: Mapped[list[str] | None] = mapped_column(JSON)
    # kernel.event alerts below this severity skip this target; None: all of them.
    min_severity: Mapped[str | None] = mapped_column(String(16))
    # env (from FREEZEWATCH_WEBHOOK_URLS, re-synced at start) | api
    source: Mapped[str] = mapped_column(String(8), default="api")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Delivery(Base):
    """The alert outbox: one row per (event, target), claimed by conditional UPDATE."""

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("target_id", "dedup_key"),
        Index("ix_deliveries_due", "state", "next_attempt_at"),
        Index("ix_deliveries_incident_id", "incident_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The Standard Webhooks `webhook-id`: the receiver's idempotency key.
    msg_id: Mapped[str] = mapped_column(String(64), unique=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("webhook_targets.id", ondelete="CASCADE"))
    dedup_key: Mapped[str] = mapped_column(String(128))
    event: Mapped[str] = mapped_column(String(32))
    host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id", ondelete="SET NULL"))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="SET NULL"))
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default=DeliveryState.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime]
    claimed_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    delivered_at: Mapped[datetime | None]
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    log: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
