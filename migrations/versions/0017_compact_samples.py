"""compact samples: each sample's data packed against a per-host template (collector.packing)
instead of whole JSON, the burst flag in its first byte; keyed by (boot_pk, seq) without a
surrogate id; load1 and gpu_power_w read from the data (not charted, so not columns);
hosts.labels (key=value pairs to filter a fleet by)

Revision ID: 0017_compact_samples
Revises: 0018_leases

Every stored sample is converted, a batch of rows at a time, into a new table that replaces
the old one: the rows come back byte for byte as they went in (``collector.packing``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

from collector.packing import Template, flatten, header, pack, shape_digest, unpack

revision = "0017_compact_samples"
down_revision = "0018_leases"
branch_labels = None
depends_on = None

BATCH = 2000
DAY_S = 86400.0
TYPED = (
    "mem_total", "mem_available", "mem_free", "swap_used", "gpu_mem_used", "psi_mem_some_avg10",
    "psi_mem_full_avg10", "psi_cpu_some_avg10", "psi_io_some_avg10", "psi_io_full_avg10",
    "gpu_util", "vllm_running", "vllm_waiting", "vllm_kv_usage",
)  # fmt: skip
BIG = ("mem_total", "mem_available", "mem_free", "swap_used", "gpu_mem_used")
KEYS = ("host_id", "boot_pk", "seq", "ts", "received_at")


def _typed_columns() -> list[sa.Column[Any]]:
    return [sa.Column(n, sa.BigInteger() if n in BIG else sa.Float(), nullable=True) for n in TYPED]


def _keys() -> list[sa.Column[Any]]:
    return [
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
    ]


def _set_aside(table: str, pk: str) -> None:
    """Rename ``samples`` to ``table`` and free the names the new table takes."""
    op.drop_index("ix_samples_host_ts", table_name="samples")
    op.rename_table("samples", table)
    if op.get_bind().dialect.name == "postgresql":  # SQLite names no primary key index
        op.execute(f"ALTER TABLE {table} RENAME CONSTRAINT pk_samples TO {pk}")


def _batches(conn: sa.Connection, select: sa.Select[Any], order: Any) -> Iterator[list[Any]]:
    """The rows of ``select`` a batch at a time, in ``order`` (a unique column or tuple)."""
    last: Any = None
    while True:
        query = select.order_by(*order).limit(BATCH)
        if last is not None:
            query = query.where(sa.tuple_(*order) > sa.tuple_(*last))
        rows = conn.execute(query).all()
        if not rows:
            return
        yield rows
        last = tuple(getattr(rows[-1], c.name) for c in order)


def upgrade() -> None:
    op.add_column("hosts", sa.Column("labels", sa.JSON(), nullable=True))
    templates = op.create_table(
        "sample_templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=32), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sample_templates")),
        sa.UniqueConstraint("host_id", "digest", name=op.f("uq_sample_templates_host_id_digest")),
        sqlite_autoincrement=True,
    )
    _set_aside("samples_json", "pk_samples_json")
    samples = op.create_table(
        "samples",
        *_keys(),
        *_typed_columns(),
        sa.Column("packed", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("boot_pk", "seq", name=op.f("pk_samples")),
    )
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        # A host's samples arrive in key order: full index pages, not the default 90 %.
        op.execute("ALTER INDEX pk_samples SET (fillfactor = 100)")
    old = sa.table("samples_json", *(sa.column(n) for n in ("id", *KEYS, "burst", *TYPED)),
                   sa.column("data", sa.JSON()))  # fmt: skip
    chosen: dict[tuple[int, int, Any], tuple[int, Template]] = {}
    for rows in _batches(conn, sa.select(old), [old.c.id]):
        out = []
        for row in rows:
            data = row.data if isinstance(row.data, dict) else json.loads(row.data)
            tokens, values = flatten(data)
            key = (row.host_id, int(row.received_at // DAY_S), tokens)
            if key not in chosen:
                chosen[key] = _template(conn, templates, key, row.received_at, data)
            template_id, template = chosen[key]
            known = {n: getattr(row, n) for n in TYPED}
            packed = pack(values, template, template_id=template_id, known=known,
                          burst=bool(row.burst))  # fmt: skip
            out.append({**{n: getattr(row, n) for n in KEYS}, **known, "packed": packed})
        conn.execute(samples.insert(), out)
    op.create_index("ix_samples_host_ts", "samples", ["host_id", "ts"], unique=False,
                    postgresql_with={"fillfactor": 100})  # fmt: skip
    op.drop_table("samples_json")


def _template(
    conn: sa.Connection, templates: sa.Table, key: Any, at: float, data: dict[str, Any]
) -> tuple[int, Template]:
    """The host's template of this shape and day: the first row met of it."""
    host_id, day, tokens = key
    template = Template(data)
    digest = shape_digest(tokens, day)
    conn.execute(templates.insert().values(host_id=host_id, digest=digest, body=template.body(),
                                           created_at=at))  # fmt: skip
    template_id = conn.scalar(
        sa.select(templates.c.id).where(
            templates.c.host_id == host_id, templates.c.digest == digest
        )
    )
    return int(template_id), template


def downgrade() -> None:
    _set_aside("samples_packed", "pk_samples_packed")
    samples = op.create_table(
        "samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        *_keys(),
        sa.Column("burst", sa.Boolean(), nullable=False),
        *_typed_columns(),
        sa.Column("load1", sa.Float(), nullable=True),
        sa.Column("gpu_power_w", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint("boot_pk", "seq", name=op.f("uq_samples_boot_pk_seq")),
    )
    conn = op.get_bind()
    new = sa.table("samples_packed", *(sa.column(n) for n in (*KEYS, *TYPED)),
                   sa.column("packed", sa.LargeBinary()))  # fmt: skip
    bodies = sa.table("sample_templates", sa.column("id"), sa.column("body", sa.LargeBinary()))
    cache: dict[int, Template] = {}
    for rows in _batches(conn, sa.select(new), [new.c.boot_pk, new.c.seq]):
        out = []
        for row in rows:
            template = None
            burst, template_id = header(row.packed)
            if template_id is not None:
                if template_id not in cache:
                    body = conn.scalar(sa.select(bodies.c.body).where(bodies.c.id == template_id))
                    cache[template_id] = Template.from_body(body)
                template = cache[template_id]
            known = {n: getattr(row, n) for n in TYPED}
            data = unpack(row.packed, template, known)
            gpu = data.get("gpu")
            first = gpu[0] if isinstance(gpu, list) and gpu else gpu
            power = first.get("power_w") if isinstance(first, dict) else None
            out.append({**{n: getattr(row, n) for n in KEYS}, "burst": burst, **known, "data": data,
                        "load1": (data.get("load") or {}).get("1"),
                        "gpu_power_w": power if _number(power) else None})  # fmt: skip
        conn.execute(samples.insert(), out)
    op.create_index("ix_samples_host_ts", "samples", ["host_id", "ts"], unique=False)
    op.drop_table("samples_packed")
    op.drop_table("sample_templates")
    with op.batch_alter_table("hosts") as batch_op:
        batch_op.drop_column("labels")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
