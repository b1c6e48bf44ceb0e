"""``freezewatch-collector storage``: rows and estimated bytes per host and kind, the retention in
force, and on request a prune run or a full reclaim of the file (``--vacuum``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from sqlalchemy import select

from collector import db
from collector.errors import AppError
from collector.models import Host
from collector.retention.policy import defaults
from collector.retention.prune import prune
from collector.retention.usage import host_usage, human_bytes, measure
from collector.settings import Settings


def add_storage_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the ``storage`` command (dispatch with ``run_storage_cli``)."""
    parser = subparsers.add_parser(
        "storage", help="disk use per host and kind (rows, estimated bytes), retention in force"
    )
    parser.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--prune", action="store_true", help="prune what retention drops first")
    parser.add_argument(
        "--vacuum",
        action="store_true",
        help="then compact the whole database (SQLite: rewrites the file, switching it to "
        "incremental auto-vacuum; needs its size free on disk and blocks ingest meanwhile)",
    )
    return parser


def run_storage_cli(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    settings = Settings(**({"db_url": args.db_url} if getattr(args, "db_url", None) else {}))
    try:
        engine = db.existing_engine(settings.db_url)
    except AppError as exc:
        sys.stderr.write(f"error: {exc.detail}\n")
        return 1
    factory = db.make_sessionmaker(engine)
    now = time.time()
    try:
        if args.prune:
            run = prune(factory, now=now, settings=settings)
            out.write(f"pruned: {json.dumps(run.deleted)}{' (more left)' if run.more else ''}\n")
        if args.vacuum:
            db.reclaim_space(factory, full=True)
            out.write("database compacted\n")
        with db.read_scope(factory) as session:
            measurement = measure(session, now=now)
            hosts = {
                h.name: host_usage(measurement, host=h, settings=settings)
                for h in session.scalars(select(Host).order_by(Host.name))
            }
    finally:
        engine.dispose()
    report: dict[str, Any] = {"retention_days": defaults(settings), "hosts": hosts}
    if args.json:
        out.write(json.dumps(report, indent=2) + "\n")
        return 0
    keep = ", ".join(f"{k} {d:g} d" if d else f"{k} forever" for k, d in defaults(settings).items())
    out.write(f"retention (days; 0 = until deleted): {keep}\n")
    out.write(f"{'host':<24} {'kind':<14} {'rows':>12} {'bytes':>11}  kept\n")
    for name, kinds in hosts.items():
        for usage in kinds:
            days = usage["retention_days"]
            kept = "until deleted" if days is None else f"{days:g} d"
            out.write(
                f"{name:<24} {usage['kind']:<14} {usage['rows']:>12} "
                f"{human_bytes(usage['bytes']):>11}  {kept}\n"
            )
        total = sum(u["bytes"] or 0 for u in kinds)
        out.write(f"{name:<24} {'total':<14} {'':>12} {human_bytes(total):>11}\n")
    return 0
