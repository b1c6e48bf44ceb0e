"""the agent's guard as each host last reported it

Revision ID: 0011_guard
Revises: 0007_vllm_lines_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_guard"
down_revision = "0010_alert_targets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("guard_state", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("guard", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("guard_reported_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_column("guard_reported_at")
        batch_op.drop_column("guard")
        batch_op.drop_column("guard_state")
