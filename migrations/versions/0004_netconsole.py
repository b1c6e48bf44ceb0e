"""netconsole: raw datagrams, per-host counters, per-channel arrival on lines

Revision ID: 0004_netconsole
Revises: 0003_matrix
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_netconsole"
down_revision = "0003_matrix"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lines", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("channels", sa.SmallInteger(), server_default="1", nullable=False)
        )
        batch_op.add_column(sa.Column("agent_received_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("netconsole_received_at", sa.Float(), nullable=True))
    # Every line so far came from the agent.
    op.execute("UPDATE lines SET agent_received_at = received_at")

    op.create_table(
        "netconsole_datagrams",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=True),
        sa.Column("source_addr", sa.String(length=64), nullable=False),
        sa.Column("source_port", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_netconsole_datagrams_host_id_hosts"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_netconsole_datagrams")),
    )
    with op.batch_alter_table("netconsole_datagrams", schema=None) as batch_op:
        batch_op.create_index("ix_netconsole_datagrams_received_at", ["received_at"], unique=False)

    op.create_table(
        "netconsole_stats",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("received", sa.BigInteger(), nullable=False),
        sa.Column("lost_msgid", sa.BigInteger(), nullable=False),
        sa.Column("incomplete", sa.BigInteger(), nullable=False),
        sa.Column("last_line_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_netconsole_stats_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", name=op.f("pk_netconsole_stats")),
    )


def downgrade() -> None:
    op.drop_table("netconsole_stats")
    with op.batch_alter_table("netconsole_datagrams", schema=None) as batch_op:
        batch_op.drop_index("ix_netconsole_datagrams_received_at")
    op.drop_table("netconsole_datagrams")
    with op.batch_alter_table("lines", schema=None) as batch_op:
        batch_op.drop_column("netconsole_received_at")
        batch_op.drop_column("agent_received_at")
        batch_op.drop_column("channels")
