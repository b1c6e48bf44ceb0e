"""incidents, probes, snapshots, artifacts, webhook outbox, collector runs

Revision ID: 0006_incidents
Revises: 0005_telemetry
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import collector.timeutil

revision = "0006_incidents"
down_revision = "0005_telemetry"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "collector_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("started_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_alive_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("down_since", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collector_runs")),
    )
    op.create_table(
        "webhook_targets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_targets")),
    )
    op.create_table(
        "host_silences",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("announced_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("shutdown", sa.Boolean(), nullable=False),
        sa.Column("boot_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_host_silences_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", name=op.f("pk_host_silences")),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("resolution", sa.String(length=24), nullable=True),
        sa.Column(
            "last_heartbeat_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("late_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("opened_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("returned_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("resolved_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("boot_id", sa.String(length=64), nullable=True),
        sa.Column("return_boot_id", sa.String(length=64), nullable=True),
        sa.Column("last_sample_ts", sa.Float(), nullable=True),
        sa.Column("stall_s", sa.Float(), nullable=True),
        sa.Column("shutdown", sa.Boolean(), nullable=False),
        sa.Column("collector_down", sa.Boolean(), nullable=False),
        sa.Column("probes", sa.JSON(), nullable=False),
        sa.Column("agent_restart", sa.JSON(), nullable=True),
        sa.Column("postmortem_state", sa.String(length=16), nullable=False),
        sa.Column("postmortem_attempts", sa.Integer(), nullable=False),
        sa.Column(
            "postmortem_due_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True
        ),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_incidents_host_id_hosts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.create_index("ix_incidents_host_opened", ["host_id", "opened_at"], unique=False)
        batch_op.create_index("ix_incidents_state", ["state"], unique=False)

    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("stdout", sa.LargeBinary(), nullable=False),
        sa.Column("stderr", sa.LargeBinary(), nullable=False),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("collected_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_artifacts_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifacts")),
        sa.UniqueConstraint("incident_id", "name", name=op.f("uq_artifacts_incident_id_name")),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("msg_id", sa.String(length=64), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("dedup_key", sa.String(length=128), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=True),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("claimed_until", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", collector.timeutil.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("log", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_deliveries_host_id_hosts"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_deliveries_incident_id_incidents"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["webhook_targets.id"],
            name=op.f("fk_deliveries_target_id_webhook_targets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
        sa.UniqueConstraint("msg_id", name=op.f("uq_deliveries_msg_id")),
        sa.UniqueConstraint(
            "target_id", "dedup_key", name=op.f("uq_deliveries_target_id_dedup_key")
        ),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_deliveries_due", ["state", "next_attempt_at"], unique=False)
        batch_op.create_index("ix_deliveries_incident_id", ["incident_id"], unique=False)

    op.create_table(
        "incident_snapshots",
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("taken_at", collector.timeutil.UTCDateTime(timezone=True), nullable=False),
        sa.Column("window_start", sa.Float(), nullable=True),
        sa.Column("window_end", sa.Float(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.Column("context", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_snapshots_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("incident_id", name=op.f("pk_incident_snapshots")),
    )


def downgrade() -> None:
    op.drop_table("incident_snapshots")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_incident_id")
        batch_op.drop_index("ix_deliveries_due")

    op.drop_table("deliveries")
    op.drop_table("artifacts")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index("ix_incidents_state")
        batch_op.drop_index("ix_incidents_host_opened")

    op.drop_table("incidents")
    op.drop_table("host_silences")
    op.drop_table("webhook_targets")
    op.drop_table("collector_runs")
