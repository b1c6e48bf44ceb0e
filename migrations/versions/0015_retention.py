"""retention: per-host overrides of the FREEZEWATCH_RETAIN_* defaults

Revision ID: 0015_retention
Revises: 0014_hardening
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_retention"
down_revision = "0014_hardening"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("hosts", sa.Column("retention", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts") as batch_op:
        batch_op.drop_column("retention")
