"""leases: collector replicas on one database (a run that joined a live peer, vLLM state rows)

Revision ID: 0018_leases
Revises: 0016_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_leases"
down_revision = "0016_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "collector_runs",
        sa.Column("joined", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column("collector_runs", sa.Column("ingest_lag_s", sa.Float(), nullable=True))
    op.create_table(
        "vllm_states",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("stream", sa.JSON(), nullable=True),
        sa.Column("hang", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_vllm_states_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", name=op.f("pk_vllm_states")),
    )


def downgrade() -> None:
    op.drop_table("vllm_states")
    with op.batch_alter_table("collector_runs") as batch_op:
        batch_op.drop_column("ingest_lag_s")
        batch_op.drop_column("joined")
