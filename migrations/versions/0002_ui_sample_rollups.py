"""sample_rollups: per-minute avg/min/max of the charted sample columns (UI downsampling)

Revision ID: 0002_ui_rollups
Revises: 0001_base
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_ui_rollups"
down_revision = "0001_base"
branch_labels = None
depends_on = None

# Frozen copy of collector.models.CHARTED_COLUMNS at this revision.
CHARTED = (
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


def upgrade() -> None:
    op.create_table(
        "sample_rollups",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.Float(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        *(
            sa.Column(f"{name}_{agg}", sa.Float(), nullable=True)
            for name in CHARTED
            for agg in ("avg", "min", "max")
        ),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_sample_rollups_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", "bucket", name=op.f("pk_sample_rollups")),
    )


def downgrade() -> None:
    op.drop_table("sample_rollups")
