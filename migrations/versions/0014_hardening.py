"""hardening: a line whose text had NUL characters is stored escaped and flagged

Revision ID: 0014_hardening
Revises: 0012_campaigns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_hardening"
down_revision = "0012_campaigns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both databases: a batch rebuild on SQLite would lose the partial
    # index of vLLM lines.
    op.add_column(
        "lines", sa.Column("escaped", sa.Boolean(), server_default=sa.false(), nullable=False)
    )


def downgrade() -> None:
    with op.batch_alter_table("lines") as batch:
        batch.drop_column("escaped")
