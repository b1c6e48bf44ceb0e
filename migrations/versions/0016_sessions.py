"""sessions: UI logins kept on the server, so logout and a new admin token end them

Revision ID: 0016_sessions
Revises: 0015_retention
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from collector.timeutil import UTCDateTime

revision = "0016_sessions"
down_revision = "0015_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id_hash", sa.String(64), nullable=False),
        sa.Column("admin_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_ui_sessions")),
    )
    # The signing secret of the old stateless cookie: no longer used.
    op.execute(sa.text("DELETE FROM meta WHERE key = 'cookie_secret'"))


def downgrade() -> None:
    op.drop_table("ui_sessions")
