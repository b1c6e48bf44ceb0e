"""base schema

Revision ID: 0001_base
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import collector.timeutil

revision = "0001_base"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_since", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("overdue_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("grace_s", sa.Float(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("current_boot_id", sa.String(length=64), nullable=True),
        sa.Column("agent_version", sa.String(length=64), nullable=True),
        sa.Column("agent_pid", sa.Integer(), nullable=True),
        sa.Column("agent_started_at", sa.Float(), nullable=True),
        sa.Column("ssh_user", sa.String(length=64), nullable=True),
        sa.Column("ssh_host", sa.String(length=255), nullable=True),
        sa.Column("ssh_port", sa.Integer(), nullable=False),
        sa.Column("ssh_key_path", sa.Text(), nullable=True),
        sa.Column("ssh_host_key", sa.Text(), nullable=True),
        sa.Column("vllm_url", sa.Text(), nullable=True),
        sa.Column("restart_agent", sa.Boolean(), nullable=False),
        sa.Column("netconsole_from", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
        sa.UniqueConstraint("name", name=op.f("uq_hosts_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_hosts_token_hash")),
    )
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.create_index("ix_hosts_overdue_at", ["overdue_at"], unique=False)

    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_meta")),
    )
    op.create_table(
        "boots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_id", sa.String(length=64), nullable=False),
        sa.Column("first_seen_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_boots_host_id_hosts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_boots")),
        sa.UniqueConstraint("host_id", "boot_id", name=op.f("uq_boots_host_id_boot_id")),
    )
    op.create_table(
        "agent_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_events")),
        sa.UniqueConstraint("boot_pk", "seq", name=op.f("uq_agent_events_boot_pk_seq")),
    )
    with op.batch_alter_table("agent_events", schema=None) as batch_op:
        batch_op.create_index("ix_agent_events_host_ts", ["host_id", "ts"], unique=False)

    op.create_table(
        "lines",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=True),
        sa.Column("kseq", sa.BigInteger(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("facility", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lines")),
        sa.UniqueConstraint("boot_pk", "kseq", name=op.f("uq_lines_boot_pk_kseq")),
        sa.UniqueConstraint("boot_pk", "seq", name=op.f("uq_lines_boot_pk_seq")),
    )
    with op.batch_alter_table("lines", schema=None) as batch_op:
        batch_op.create_index("ix_lines_host_ts", ["host_id", "ts"], unique=False)

    op.create_table(
        "samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("burst", sa.Boolean(), nullable=False),
        sa.Column("mem_total", sa.BigInteger(), nullable=True),
        sa.Column("mem_available", sa.BigInteger(), nullable=True),
        sa.Column("mem_free", sa.BigInteger(), nullable=True),
        sa.Column("swap_used", sa.BigInteger(), nullable=True),
        sa.Column("psi_mem_some_avg10", sa.Float(), nullable=True),
        sa.Column("psi_mem_full_avg10", sa.Float(), nullable=True),
        sa.Column("psi_cpu_some_avg10", sa.Float(), nullable=True),
        sa.Column("psi_io_some_avg10", sa.Float(), nullable=True),
        sa.Column("psi_io_full_avg10", sa.Float(), nullable=True),
        sa.Column("load1", sa.Float(), nullable=True),
        sa.Column("gpu_util", sa.Float(), nullable=True),
        sa.Column("gpu_mem_used", sa.BigInteger(), nullable=True),
        sa.Column("gpu_power_w", sa.Float(), nullable=True),
        sa.Column("vllm_running", sa.Float(), nullable=True),
        sa.Column("vllm_waiting", sa.Float(), nullable=True),
        sa.Column("vllm_kv_usage", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint("boot_pk", "seq", name=op.f("uq_samples_boot_pk_seq")),
    )
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index("ix_samples_host_ts", ["host_id", "ts"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index("ix_samples_host_ts")

    op.drop_table("samples")
    with op.batch_alter_table("lines", schema=None) as batch_op:
        batch_op.drop_index("ix_lines_host_ts")

    op.drop_table("lines")
    with op.batch_alter_table("agent_events", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_events_host_ts")

    op.drop_table("agent_events")
    op.drop_table("boots")
    op.drop_table("meta")
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_index("ix_hosts_overdue_at")

    op.drop_table("hosts")
