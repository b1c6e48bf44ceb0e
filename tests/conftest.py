"""Shared real-component fixtures: PostgreSQL, OpenSSH sshd, network namespaces.

A missing component skips locally and fails under `CI=true` (tests.support.skips.require).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from xdist.scheduler import LoadFileScheduling

from tests.support import netns as netns_support
from tests.support import postgres as pg_support
from tests.support import sshd as sshd_support
from tests.support import tmpfs as tmpfs_support
from tests.support.skips import require

PG_URL_ENV = "FREEZEWATCH_TEST_PG_URL"
# Comma-separated databases whose parametrized variants run (default: every one): the Python
# 3.10 stage runs the SQLite ones, as what differs between Pythons is not the database.
BACKENDS_ENV = "FREEZEWATCH_TEST_BACKENDS"
BACKENDS = ("sqlite", "postgres")


# The directories of the long end-to-end files (real sshd, agents, collectors, Chromium): run
# first, so that the short files fill the workers around them instead of waiting for them.
LONG_FIRST = ("tests/browser/", "tests/twohost/", "tests/integration/")
# One worker for the browser files: each worker that runs one starts its own Chromium, live
# collector and matrix campaign (session fixtures) and keeps them to the end.
TOGETHER = "tests/browser/"


class LongFilesFirst(LoadFileScheduling):
    """pytest-xdist's ``--dist loadfile`` in collection order, the browser files one unit."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # by test count, else: not by length

    def _split_scope(self, nodeid: str) -> str:
        return TOGETHER if nodeid.startswith(TOGETHER) else super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LongFilesFirst:
    return LongFilesFirst(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long files first (a stable sort: each file's tests stay together and in order); then
    deselect the variants of a database ``$FREEZEWATCH_TEST_BACKENDS`` leaves out."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))
    chosen = os.environ.get(BACKENDS_ENV)
    if not chosen:
        return
    wanted = {name.strip() for name in chosen.split(",")}
    if unknown := wanted - set(BACKENDS):
        raise pytest.UsageError(f"{BACKENDS_ENV}: unknown database(s) {sorted(unknown)}")
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        left_out = any(value in BACKENDS and value not in wanted for value in params)
        (dropped if left_out else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """SQLAlchemy URL of a PostgreSQL database for this session ($FREEZEWATCH_TEST_PG_URL or a
    throwaway cluster stopped and removed at session end)."""
    external = os.environ.get(PG_URL_ENV)
    if external:
        try:
            with psycopg.connect(**pg_support.conninfo(external), connect_timeout=10):
                pass
        except psycopg.Error as exc:
            pytest.fail(f"{PG_URL_ENV} is set but not reachable: {exc}", pytrace=False)
        yield external
        return
    ok, reason = pg_support.available()
    require(ok, reason)
    with pg_support.ThrowawayPostgres() as server:
        yield server.url


@pytest.fixture(scope="module")
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """An empty database of its own for one test module, dropped afterwards."""
    url = pg_support.fresh_database(postgres_url)
    yield url
    pg_support.drop_database(url)


@pytest.fixture(scope="session")
def sshd() -> Iterator[sshd_support.TestSshd]:
    """A real sshd shared by the session; tests must not stop or SIGSTOP it (use private_sshd)."""
    ok, reason = sshd_support.available()
    require(ok, reason)
    with sshd_support.TestSshd() as server:
        yield server


@pytest.fixture
def private_sshd() -> Iterator[sshd_support.TestSshd]:
    """A real sshd of this test alone, free to be stopped, frozen or killed."""
    ok, reason = sshd_support.available()
    require(ok, reason)
    with sshd_support.TestSshd() as server:
        yield server


@pytest.fixture
def netns() -> Iterator[netns_support.NetNamespace]:
    """A network namespace with a veth pair to the root namespace, always torn down."""
    require(netns_support.available(), "needs root and a working `ip netns`")
    with netns_support.NetNamespace() as namespace:
        yield namespace


@pytest.fixture
def small_disk() -> Iterator[Callable[[str], Path]]:
    """Mounts real tmpfs filesystems of a given size (``small_disk("2m")``), unmounted after."""
    require(tmpfs_support.available(), "needs root and `mount -t tmpfs`")
    with contextlib.ExitStack() as stack:
        yield lambda size: stack.enter_context(tmpfs_support.small_tmpfs(size))
