"""``freezewatch-collector guard push NAME RULES`` and ``guard show NAME``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from collector import db
from collector.errors import AppError
from collector.guard.push import DEFAULT_PATH, push_rules, read_rules
from collector.guard.report import GuardOut
from collector.hosts import registry
from collector.remote.connect import SSHError
from collector.remote.ssh import SSHClient
from collector.remote.targets import require_ssh_target
from collector.settings import Settings


def add_guard_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the ``guard`` command (dispatch with ``run_guard_cli``)."""
    parser = subparsers.add_parser("guard", help="the agent's guard: push rules, show state")
    sub = parser.add_subparsers(dest="guard_command", required=True)
    push = sub.add_parser("push", help="check a rules file, write it on the host over SSH")
    push.add_argument("name", help="registered host (with SSH settings)")
    push.add_argument("rules", type=Path, help="rules file (YAML or JSON)")
    push.add_argument("--path", default=DEFAULT_PATH, help=f"on the host (default {DEFAULT_PATH})")
    push.add_argument("--no-restart", action="store_true", help="do not restart the agent")
    push.add_argument("--sudo", action="store_true", help="run the steps with sudo -n")
    push.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    show = sub.add_parser("show", help="the guard's state and rules as the agent reported them")
    show.add_argument("name")
    show.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    return parser


def run_guard_cli(
    args: argparse.Namespace,
    *,
    ssh: SSHClient | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """0 done; 1 the host or SSH failed; 2 the rules file is wrong."""
    out, err = out or sys.stdout, err or sys.stderr
    settings = Settings(**({"db_url": args.db_url} if getattr(args, "db_url", None) else {}))
    if args.guard_command == "push":
        try:
            document, parsed = read_rules(args.rules)
        except AppError as exc:
            err.write(f"error: {exc.detail}\n")
            return 2
        out.write(f"rules: {json.dumps(parsed.summary())}\n")
    try:
        engine = db.existing_engine(settings.db_url)
    except AppError as exc:
        err.write(f"error: {exc.detail}\n")
        return 1
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            host = registry.get_host(session, name=args.name)
            if args.guard_command == "show":
                out.write(GuardOut.of(host).model_dump_json(indent=2) + "\n")
                return 0
            target = require_ssh_target(host)
            reported = GuardOut.of(host)
        steps = push_rules(
            ssh or SSHClient(),
            target,
            document=document,
            path=args.path,
            restart=not args.no_restart,
            sudo=args.sudo,
        )
    except AppError as exc:
        err.write(f"error: {exc.detail}\n")
        return 1
    except (SSHError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return 1
    finally:
        engine.dispose()
    for step in steps:
        out.write(f"{step['step']}: {'ok' if step['ok'] else 'FAILED'} ({step['detail']})\n")
    note = env_note(reported, args.path)
    if note:
        out.write(note + "\n")
    return 0 if all(s["ok"] for s in steps) else 1


def env_note(reported: GuardOut, path: str) -> str | None:
    """What to set on the host when its agent does not already read ``path`` (None: it does)."""
    if reported.source == path:
        return None
    if reported.state is None:
        said = "the host's agent has not reported its guard yet"
    elif reported.source is None:
        said = "the host's agent reported no rules file"
    else:
        said = f"the host's agent reads its rules from {reported.source}"
    return f"note: {said}; it reads {path} only with FREEZEWATCH_AGENT_GUARD={path} in its env"
