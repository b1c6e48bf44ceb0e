"""matrix runs and their steps

Revision ID: 0003_matrix
Revises: 0002_ui_rollups
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import collector.timeutil

revision = "0003_matrix"
down_revision = "0002_ui_rollups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "matrix_schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("preset", sa.String(length=64), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_matrix_schedules_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matrix_schedules")),
        sa.UniqueConstraint("name", name=op.f("uq_matrix_schedules_name")),
    )
    op.create_table(
        "matrix_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("preset", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("ended_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("requests_path", sa.Text(), nullable=True),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("schedule_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["matrix_schedules.id"],
            name=op.f("fk_matrix_runs_schedule_id_matrix_schedules"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_matrix_runs_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matrix_runs")),
    )
    with op.batch_alter_table("matrix_runs", schema=None) as batch_op:
        batch_op.create_index("ix_matrix_runs_status", ["status"], unique=False)

    op.create_table(
        "matrix_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("profile", sa.String(length=255), nullable=False),
        sa.Column("repetition", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["matrix_runs.id"],
            name=op.f("fk_matrix_steps_run_id_matrix_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matrix_steps")),
    )
    with op.batch_alter_table("matrix_steps", schema=None) as batch_op:
        batch_op.create_index("ix_matrix_steps_run_id", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_table("matrix_steps")
    op.drop_table("matrix_runs")
    op.drop_table("matrix_schedules")
