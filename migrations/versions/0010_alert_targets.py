"""alert targets: Apprise URLs beside webhooks, per-target event filter and kernel severity

Revision ID: 0010_alert_targets
Revises: 0007_vllm_lines_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_alert_targets"
down_revision = "0007_vllm_lines_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_targets") as batch:
        batch.add_column(sa.Column("events", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("min_severity", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_targets") as batch:
        batch.drop_column("min_severity")
        batch.drop_column("events")
