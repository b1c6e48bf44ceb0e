"""matrix campaigns: planned reboots, power-cycle hooks, run leases and remote groups

Revision ID: 0012_campaigns
Revises: 0009_faults
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import collector.timeutil

revision = "0012_campaigns"
down_revision = "0009_faults"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool) -> sa.Column:
    return sa.Column(name, collector.timeutil.UTCDateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "planned_reboots",
        sa.Column("host_id", sa.Integer(), nullable=False),
        _when("requested_at", False),
        _when("expires_at", False),
        sa.Column("boot_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_planned_reboots_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", name=op.f("pk_planned_reboots")),
    )
    op.add_column("hosts", sa.Column("power", sa.JSON(), nullable=True))
    op.add_column("incidents", sa.Column("power_cycles", sa.JSON(), nullable=True))
    op.add_column("matrix_runs", sa.Column("lease_owner", sa.String(length=128), nullable=True))
    op.add_column("matrix_runs", _when("lease_until", True))
    op.add_column("matrix_runs", sa.Column("remote_groups", sa.JSON(), nullable=True))
    op.add_column("matrix_runs", sa.Column("events", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("matrix_runs") as batch_op:
        for name in ("events", "remote_groups", "lease_until", "lease_owner"):
            batch_op.drop_column(name)
    with op.batch_alter_table("incidents") as batch_op:
        batch_op.drop_column("power_cycles")
    with op.batch_alter_table("hosts") as batch_op:
        batch_op.drop_column("power")
    op.drop_table("planned_reboots")
