"""db.py: a read never waits for SQLite's one writer."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import select, update

from collector import db
from collector.models import Meta


def test_a_read_scope_does_not_wait_for_the_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fw.db'}"
    db.migrate(url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    with db.session_scope(factory) as session:
        session.add(Meta(key="k", value="v"))
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.session_scope(factory) as session:  # BEGIN IMMEDIATE: the write lock
            session.execute(update(Meta).values(value="x"))
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        with db.read_scope(factory) as session:  # would wait out the busy timeout, then fail
            keys = list(session.scalars(select(Meta.key)))
        assert keys == ["k"]  # the committed row, read beside the open write
        assert thread.is_alive()
    finally:
        release.set()
        thread.join(30)
        engine.dispose()
