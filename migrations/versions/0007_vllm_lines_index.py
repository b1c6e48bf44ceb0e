"""partial index of vLLM lines by (host, ts): correlation during a kernel storm

Revision ID: 0007_vllm_lines_index
Revises: 0006_incidents
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_vllm_lines_index"
down_revision = "0006_incidents"
branch_labels = None
depends_on = None

WHERE = sa.text("source = 'vllm'")


def upgrade() -> None:
    op.create_index(
        "ix_lines_vllm_host_ts",
        "lines",
        ["host_id", "ts"],
        sqlite_where=WHERE,
        postgresql_where=WHERE,
    )


def downgrade() -> None:
    op.drop_index("ix_lines_vllm_host_ts", table_name="lines")
