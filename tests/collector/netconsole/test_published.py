"""The receiver's figures as the workers that do not run it see them (``serve --workers``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from collector.netconsole.channel import ChannelStatsOut
from collector.netconsole.published import NOTHING_YET, PublishedReceiver, Publisher


class Receiver:
    """The owner's side: figures that move between two publications."""

    def __init__(self) -> None:
        self.figures = NOTHING_YET.model_copy(
            update={"listening": "0.0.0.0:6666", "datagrams": 7, "unknown_senders": {"10.0.0.9": 2}}
        )

    def stats(self) -> ChannelStatsOut:
        return self.figures

    def allowlist_changed(self) -> None:
        pass


def test_other_workers_read_what_the_owner_published(tmp_path: Path) -> None:
    path = tmp_path / "netconsole.json"
    owner, other = Receiver(), PublishedReceiver(path)
    publisher = Publisher(owner, path)
    publisher.start()  # publishes at once, then every second
    try:
        assert other.stats() == owner.stats()
        owner.figures = owner.figures.model_copy(update={"datagrams": 8})
        publisher.publish()
        assert other.stats().datagrams == 8
        assert [p.name for p in tmp_path.iterdir()] == ["netconsole.json"]  # no partial copy left
    finally:
        publisher.stop()


def test_no_figures_yet_or_unreadable_ones_read_as_none(tmp_path: Path) -> None:
    path = tmp_path / "netconsole.json"
    assert PublishedReceiver(path).stats() == NOTHING_YET
    path.write_text('{"datagrams": ')
    assert PublishedReceiver(path).stats() == NOTHING_YET


def test_unreadable_figures_are_reported_once_until_readable_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Read on every scrape: a broken file warns once, not once a scrape, and says when it
    is back."""
    path = tmp_path / "netconsole.json"
    path.write_text('{"datagrams": ')
    other = PublishedReceiver(path)
    with caplog.at_level(logging.INFO, logger="collector.netconsole.published"):
        for _ in range(3):
            assert other.stats() == NOTHING_YET
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        assert "unreadable" in caplog.records[0].getMessage()
        path.write_text(NOTHING_YET.model_copy(update={"datagrams": 3}).model_dump_json())
        assert other.stats().datagrams == 3
        assert other.stats().datagrams == 3
        assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
        path.unlink()
        assert other.stats() == NOTHING_YET
        assert [r.levelname for r in caplog.records] == ["WARNING", "INFO", "WARNING"]
