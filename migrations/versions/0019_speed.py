"""speed: post-mortems found through an index (the scheduler asks every second or two)

Revision ID: 0019_speed
Revises: 0017_compact_samples
"""

from __future__ import annotations

from alembic import op

revision = "0019_speed"
down_revision = "0017_compact_samples"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_incidents_postmortem_due", "incidents", ["postmortem_state", "postmortem_due_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_incidents_postmortem_due", table_name="incidents")
