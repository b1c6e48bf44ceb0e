"""Disk use per host and kind on the host API, the host page and ``freezewatch-collector
storage``; a host's own retention through PATCH and ``add-host --retain``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from collector import db
from collector.cli import build_parser, main
from collector.retention.cli import run_storage_cli
from collector.retention.usage import measure_if_due
from tests.collector.conftest import Collector
from tests.collector.freeze_support import factory
from tests.collector.retention.test_prune import OLD, feed


def kinds(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k["kind"]: k for k in body["storage"]["kinds"]}


def test_the_host_api_counts_rows_and_sizes_them_per_kind(collector: Collector) -> None:
    c = collector
    token = c.add_host("spark-01")
    feed(c, token, "spark-01", at=OLD, seq=1)
    body = c.client.get("/api/v1/hosts/spark-01", headers=c.admin).json()
    usage = kinds(body)
    assert usage["samples"]["rows"] == 10 and usage["samples"]["retention_days"] == 30
    # The routine kernel line, the journal's err and the Xid (priority 4) are lines; the kernel
    # err is a kernel line, kept a year.
    assert usage["lines"]["rows"] == 3 and usage["kernel_lines"]["rows"] == 1
    assert usage["kernel_lines"]["retention_days"] == 365
    assert usage["kernel_events"]["rows"] == 1
    assert usage["matrix_runs"]["retention_days"] is None
    assert usage["samples"]["bytes"] > 0
    assert body["storage"]["bytes"] == sum(k["bytes"] for k in usage.values())


def test_a_host_keeps_what_it_was_told_and_the_figures_are_stored(collector: Collector) -> None:
    c = collector
    token = c.add_host("spark-01")
    response = c.client.patch(
        "/api/v1/hosts/spark-01", json={"retention": {"samples": 7, "lines": 0}}, headers=c.admin
    )
    assert response.status_code == 200, response.text
    assert response.json()["config"]["retention"] == {"samples": 7.0, "lines": 0.0}
    bad = c.client.patch("/api/v1/hosts/spark-01", json={"retention": {"logs": 7}}, headers=c.admin)
    assert bad.status_code == 422
    feed(c, token, "spark-01", at=OLD, seq=1)
    assert measure_if_due(factory(c), now=OLD, settings=c.settings)
    assert not measure_if_due(factory(c), now=OLD + 60, settings=c.settings)  # not due yet
    feed(c, token, "spark-01", at=OLD + 100, seq=50)
    usage = kinds(c.client.get("/api/v1/hosts/spark-01", headers=c.admin).json())
    assert usage["samples"]["rows"] == 10  # as measured, before the second batch
    assert usage["samples"]["retention_days"] == 7
    assert (
        usage["lines"]["retention_days"] is None and usage["kernel_lines"]["retention_days"] is None
    )
    c.client.patch("/api/v1/hosts/spark-01", json={"retention": {"lines": None}}, headers=c.admin)
    usage = kinds(c.client.get("/api/v1/hosts/spark-01", headers=c.admin).json())
    assert usage["lines"]["retention_days"] == 90

    page = c.client.get("/hosts/spark-01", headers={**c.admin, "Accept": "text/html"})
    assert page.status_code == 200
    assert 'id="storage"' in page.text and 'data-kind="kernel_lines"' in page.text


def test_the_storage_command_prints_every_host_and_the_retention(db_url: str) -> None:
    assert main(["--db", db_url, "add-host", "spark-02", "--retain", "samples=60"]) == 0
    assert main(["--db", db_url, "add-host", "spark-02", "--update", "--retain", "rollups=0"]) == 0
    out = io.StringIO()
    assert run_storage_cli(build_parser().parse_args(["--db", db_url, "storage"]), out=out) == 0
    text = out.getvalue()
    assert "retention (days; 0 = until deleted): samples 30 d" in text
    row = next(r for r in text.splitlines() if r.startswith("spark-02") and " samples " in r)
    assert row.split()[-2:] == ["60", "d"]
    assert "until deleted" in next(r for r in text.splitlines() if " rollups " in r)

    out = io.StringIO()
    args = build_parser().parse_args(["--db", db_url, "storage", "--json", "--prune", "--vacuum"])
    assert run_storage_cli(args, out=out) == 0
    report = json.loads(out.getvalue().split("\n", 2)[2])
    assert report["retention_days"]["lines"] == 90
    assert [k["kind"] for k in report["hosts"]["spark-02"]][:2] == ["samples", "rollups"]
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":  # --vacuum switched the file to incremental
            assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2
    engine.dispose()


def test_storage_and_guard_show_refuse_a_database_that_is_not_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from the wrong directory (or without --db after `make demo`), they say which URL has
    no collector database instead of a traceback, and leave no empty SQLite file behind."""
    missing = tmp_path / "freezewatch.db"
    empty = tmp_path / "empty.db"
    empty.touch()  # a file, but nothing migrated into it
    for path in (missing, empty):
        url = f"sqlite:///{path}"
        for argv in (["storage"], ["storage", "--json"], ["guard", "show", "spark-01"]):
            assert main(["--db", url, *argv]) == 1, argv
            err = capsys.readouterr().err
            assert f"error: no freezewatch database at {url}" in err, err
            assert "Traceback" not in err
    assert not missing.exists()
