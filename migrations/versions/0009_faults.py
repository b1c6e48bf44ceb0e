"""faults: the agent's spool backlog and clock offset per host, alerts held after a restart

Revision ID: 0009_faults
Revises: 0008_forensics
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import collector.timeutil

revision = "0009_faults"
down_revision = "0008_forensics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("backlog_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("clock_offset_s", sa.Float(), nullable=True))
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(
            sa.Column(
                "alert_held_until", collector.timeutil.UTCDateTime(timezone=True), nullable=True
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("alert_held_until")
    with op.batch_alter_table("hosts") as batch:
        batch.drop_column("clock_offset_s")
        batch.drop_column("backlog_bytes")
