"""kernel events: code, device, module, severity, action; occurrences and the boots they span;
the kernel events found in post-mortem artifacts

Revision ID: 0008_forensics
Revises: 0007_vllm_lines_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_forensics"
down_revision = "0011_guard"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("kernel_events") as batch:
        batch.add_column(sa.Column("code", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("device", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("module", sa.String(length=64), nullable=True))
        batch.add_column(
            sa.Column("severity", sa.String(length=16), server_default="error", nullable=False)
        )
        batch.add_column(
            sa.Column("action", sa.String(length=24), server_default="none", nullable=False)
        )
        batch.add_column(sa.Column("occurrence_id", sa.BigInteger(), nullable=True))
        batch.create_index("ix_kernel_events_occurrence_id", ["occurrence_id"])
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("kernel_events", sa.JSON(), server_default="[]", nullable=False))
    op.create_table(
        "kernel_occurrences",
        sa.Column("id", BigId, nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("device", sa.String(length=64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("first_ts", sa.Float(), nullable=False),
        sa.Column("last_ts", sa.Float(), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=24), nullable=False),
        sa.Column("meaning", sa.Text(), nullable=True),
        sa.Column("boots", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_kernel_occurrences_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_occurrences")),
        sa.UniqueConstraint(
            "host_id",
            "kind",
            "code",
            "device",
            name=op.f("uq_kernel_occurrences_host_id_kind_code_device"),
        ),
    )
    op.create_table(
        "kernel_occurrence_boots",
        sa.Column("occurrence_id", sa.BigInteger(), nullable=False),
        sa.Column("boot_pk", sa.Integer(), nullable=False),
        sa.Column("first_ts", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["boot_pk"],
            ["boots.id"],
            name=op.f("fk_kernel_occurrence_boots_boot_pk_boots"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["occurrence_id"],
            ["kernel_occurrences.id"],
            name=op.f("fk_kernel_occurrence_boots_occurrence_id_kernel_occurrences"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "occurrence_id", "boot_pk", name=op.f("pk_kernel_occurrence_boots")
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("kernel_events")
    op.drop_table("kernel_occurrence_boots")
    op.drop_table("kernel_occurrences")
    with op.batch_alter_table("kernel_events") as batch:
        batch.drop_index("ix_kernel_events_occurrence_id")
        for name in ("occurrence_id", "action", "severity", "module", "device", "code"):
            batch.drop_column(name)
