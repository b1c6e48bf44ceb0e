"""A throwaway PostgreSQL cluster (initdb + pg_ctl in a temp dir) for tests and benches.

`ThrowawayPostgres` is a context manager usable outside pytest:

    with ThrowawayPostgres() as pg:
        engine = create_engine(pg.url)

As root, `initdb` refuses to run, so the cluster is created and run as the `postgres`
system user (`runuser -u postgres --`); the temp dir is chowned to it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg
from sqlalchemy.engine import URL, make_url

from tests.support.ports import free_port

DEFAULT_DATABASE = "freezewatch_test"
SERVER_OPTIONS = {
    # A test cluster never survives a crash, so durability is traded for speed.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "listen_addresses": "127.0.0.1",
}


class PostgresUnavailable(RuntimeError):
    """PostgreSQL binaries or a usable OS user are missing; the message says which."""


def find_bin_dir() -> Path | None:
    """Where initdb/pg_ctl live: $FREEZEWATCH_TEST_PG_BIN, newest Debian version, or PATH."""
    explicit = os.environ.get("FREEZEWATCH_TEST_PG_BIN")
    if explicit:
        return Path(explicit)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if candidates:
        return Path(candidates[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def available() -> tuple[bool, str]:
    """Whether a throwaway cluster can be started here, and if not, why."""
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        return (
            False,
            "PostgreSQL server binaries (initdb, pg_ctl) not found; apt install postgresql",
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False, "running as root but no 'postgres' OS user to run initdb as"
        if shutil.which("runuser") is None:
            return False, "running as root but runuser is missing"
    return True, ""


def conninfo(url: str | URL) -> dict[str, object]:
    """psycopg.connect keyword arguments for an SQLAlchemy URL."""
    parsed = make_url(url) if isinstance(url, str) else url
    kwargs: dict[str, object] = {
        "host": parsed.host or "127.0.0.1",
        "port": parsed.port or 5432,
        "user": parsed.username or "postgres",
        "dbname": parsed.database or "postgres",
    }
    if parsed.password:
        kwargs["password"] = parsed.password
    return kwargs


def fresh_database(admin_url: str, prefix: str = "fw", *, template: str | None = None) -> str:
    """Create a database on the server of `admin_url` and return its SQLAlchemy URL: empty, or
    a copy of the database ``template`` names (a URL; nobody may be connected to it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{make_url(template).database}"' if template else ""
    with psycopg.connect(**conninfo(admin_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop the database named by `url`, disconnecting its sessions (PostgreSQL >= 13)."""
    parsed = make_url(url)
    admin = parsed.set(database="postgres")
    with psycopg.connect(**conninfo(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')


class ThrowawayPostgres:
    """A private PostgreSQL cluster on a free loopback port, removed on exit.

    `url` is `postgresql+psycopg://postgres@127.0.0.1:PORT/<database>` (trust auth on loopback).
    """

    def __init__(
        self,
        *,
        database: str = DEFAULT_DATABASE,
        bin_dir: Path | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.database = database
        self.bin_dir = bin_dir or find_bin_dir()
        self.start_timeout_s = start_timeout_s
        self.workdir: Path | None = None
        self.port: int | None = None
        self._running = False

    @property
    def data_dir(self) -> Path:
        assert self.workdir is not None, "cluster not started"
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None, "cluster not started"
        return self.workdir / "postgres.log"

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    @property
    def admin_url(self) -> str:
        """URL of the `postgres` maintenance database (for CREATE/DROP DATABASE)."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        assert self.port is not None, "cluster not started"
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return argv

    def _run(self, argv: list[str], timeout: float) -> None:
        proc = subprocess.run(
            self._as_owner(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            log = (
                self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
            )
            raise RuntimeError(
                f"{argv[0]} failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n{log}"
            )

    def start(self) -> str:
        """initdb, start on a free port, create the database; returns `url`."""
        ok, reason = available()
        if not ok:
            raise PostgresUnavailable(reason)
        assert self.bin_dir is not None
        self.workdir = Path(tempfile.mkdtemp(prefix="freezewatch-pg-"))
        try:
            if os.geteuid() == 0:
                owner = pwd.getpwnam("postgres")
                os.chown(self.workdir, owner.pw_uid, owner.pw_gid)
            self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "--username=postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
                timeout=120,
            )
            self._start_on_free_port()
            with psycopg.connect(**conninfo(self.admin_url), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.database}"')
        except BaseException:
            self.stop()
            raise
        return self.url

    def _start_on_free_port(self) -> None:
        # A free port can be taken between picking and binding; retry a few times.
        last_error: Exception | None = None
        for _ in range(3):
            self.port = free_port()
            options = {**SERVER_OPTIONS, "port": str(self.port)}
            options["unix_socket_directories"] = str(self.workdir)
            opt_string = " ".join(f"-c {key}={value}" for key, value in options.items())
            try:
                self._run(
                    [
                        str(self.bin_dir / "pg_ctl"),
                        "start",
                        "-w",
                        "-t",
                        str(int(self.start_timeout_s)),
                        "-D",
                        str(self.data_dir),
                        "-l",
                        str(self.log_path),
                        "-o",
                        opt_string,
                    ],
                    timeout=self.start_timeout_s + 10,
                )
            except RuntimeError as exc:
                last_error = exc
                continue
            self._running = True
            return
        raise RuntimeError(f"could not start PostgreSQL: {last_error}")

    def stop(self) -> None:
        """Stop the server (immediate mode: nothing to keep) and remove its files."""
        if self._running and self.bin_dir is not None:
            with contextlib.suppress(Exception):
                self._run(
                    [
                        str(self.bin_dir / "pg_ctl"),
                        "stop",
                        "-m",
                        "immediate",
                        "-w",
                        "-D",
                        str(self.data_dir),
                    ],
                    timeout=60,
                )
            self._running = False
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> ThrowawayPostgres:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
