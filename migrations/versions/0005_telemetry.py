"""telemetry: kernel events, vLLM starts and phases, host events

Revision ID: 0005_telemetry
Revises: 0004_netconsole
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_telemetry"
down_revision = "0004_netconsole"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_host_events_host_id_hosts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_events")),
    )
    with op.batch_alter_table("host_events", schema=None) as batch_op:
        batch_op.create_index("ix_host_events_host_ts", ["host_id", "ts"], unique=False)

    op.create_table(
        "vllm_starts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=True),
        sa.Column("started_ts", sa.Float(), nullable=False),
        sa.Column("first_line_id", sa.BigInteger(), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("vllm_version", sa.String(length=64), nullable=True),
        sa.Column("model_load_gib", sa.Float(), nullable=True),
        sa.Column("model_load_s", sa.Float(), nullable=True),
        sa.Column("drafter_loaded", sa.Boolean(), nullable=False),
        sa.Column("cuda_graph_estimate_gib", sa.Float(), nullable=True),
        sa.Column("kv_cache_gib", sa.Float(), nullable=True),
        sa.Column("kv_cache_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_concurrency", sa.Float(), nullable=True),
        sa.Column("max_concurrency_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cuda_graph_pool_actual_gib", sa.Float(), nullable=True),
        sa.Column("cuda_graph_pool_estimated_gib", sa.Float(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("anomalies", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["boot_pk"],
            ["boots.id"],
            name=op.f("fk_vllm_starts_boot_pk_boots"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_vllm_starts_host_id_hosts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vllm_starts")),
    )
    with op.batch_alter_table("vllm_starts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_vllm_starts_host_started", ["host_id", "started_ts"], unique=False
        )

    op.create_table(
        "kernel_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("line_id", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("xid", sa.Integer(), nullable=True),
        sa.Column("pci", sa.String(length=32), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("process", sa.String(length=255), nullable=True),
        sa.Column("meaning", sa.Text(), nullable=True),
        sa.Column("nv_err", sa.String(length=64), nullable=True),
        sa.Column("call_site", sa.String(length=255), nullable=True),
        sa.Column("vllm_phase", sa.String(length=32), nullable=True),
        sa.Column("vllm_line_id", sa.BigInteger(), nullable=True),
        sa.Column("vllm_line_ts", sa.Float(), nullable=True),
        sa.Column("vllm_line", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["boot_pk"],
            ["boots.id"],
            name=op.f("fk_kernel_events_boot_pk_boots"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_kernel_events_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["line_id"],
            ["lines.id"],
            name=op.f("fk_kernel_events_line_id_lines"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["vllm_line_id"],
            ["lines.id"],
            name=op.f("fk_kernel_events_vllm_line_id_lines"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_events")),
        sa.UniqueConstraint("line_id", name=op.f("uq_kernel_events_line_id")),
    )
    with op.batch_alter_table("kernel_events", schema=None) as batch_op:
        batch_op.create_index("ix_kernel_events_host_ts", ["host_id", "ts"], unique=False)

    op.create_table(
        "vllm_phases",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("start_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("line_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_vllm_phases_host_id_hosts"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["start_id"],
            ["vllm_starts.id"],
            name=op.f("fk_vllm_phases_start_id_vllm_starts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vllm_phases")),
    )
    with op.batch_alter_table("vllm_phases", schema=None) as batch_op:
        batch_op.create_index("ix_vllm_phases_host_ts", ["host_id", "ts"], unique=False)
        batch_op.create_index("ix_vllm_phases_start_id", ["start_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("vllm_phases", schema=None) as batch_op:
        batch_op.drop_index("ix_vllm_phases_start_id")
        batch_op.drop_index("ix_vllm_phases_host_ts")

    op.drop_table("vllm_phases")
    with op.batch_alter_table("kernel_events", schema=None) as batch_op:
        batch_op.drop_index("ix_kernel_events_host_ts")

    op.drop_table("kernel_events")
    with op.batch_alter_table("vllm_starts", schema=None) as batch_op:
        batch_op.drop_index("ix_vllm_starts_host_started")

    op.drop_table("vllm_starts")
    with op.batch_alter_table("host_events", schema=None) as batch_op:
        batch_op.drop_index("ix_host_events_host_ts")

    op.drop_table("host_events")
