"""The Alembic chain builds exactly the models' schema (no drift) and downgrades cleanly."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from collector import db
from collector.models import Base


def test_migrations_match_models_and_downgrade(db_url: str) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()
    command.downgrade(db.alembic_config(db_url), "0001_base")
    command.upgrade(db.alembic_config(db_url), "head")
