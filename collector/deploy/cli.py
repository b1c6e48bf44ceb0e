"""`freezewatch-collector deploy-agent NAME [--netconsole] [--uninstall] [--no-start]`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from collector import db
from collector.deploy.install import DeployOptions, deploy_agent, uninstall_agent
from collector.deploy.report import InstallReport, UninstallReport
from collector.errors import AppError
from collector.remote.ssh import SSHClient
from collector.settings import Settings


def add_deploy_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the `deploy-agent` command (dispatch with `run_deploy_cli`)."""
    parser = subparsers.add_parser(
        "deploy-agent",
        help="install, upgrade or remove the agent on a registered host over SSH",
        description="Upload the agent built from this collector, its systemd unit and "
        "/etc/freezewatch/agent.env (token, collector URL, mode 0600) to host NAME over its SSH "
        "settings, start it and wait for its first batch. Run again to upgrade in place.",
    )
    parser.add_argument("name")
    parser.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    parser.add_argument(
        "--netconsole",
        nargs="?",
        const="",
        default=None,
        metavar="HOST:PORT",
        help="also send the kernel log over netconsole (default: the collector's host and UDP "
        "port) and load the module at boot",
    )
    parser.add_argument(
        "--collector-url", help="URL the agent posts to (default: FREEZEWATCH_PUBLIC_URL)"
    )
    parser.add_argument("--uninstall", action="store_true", help="stop and remove the agent")
    parser.add_argument("--no-start", action="store_true", help="write the files, start nothing")
    parser.add_argument(
        "--root", default="/", metavar="DIR", help="install under DIR (an image, a chroot)"
    )
    parser.add_argument(
        "--wait", type=float, default=60.0, metavar="S", help="wait this long for the first batch"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def report_text(report: dict[str, Any]) -> str:
    """The report for a terminal: what was written or removed, what runs, what to check."""
    facts = report["host_facts"]
    systemd = "yes" if facts["systemd"] else "no"
    out = [
        f"{report['action']} on {report['host']} as {facts['user']}"
        f" (python3 {facts['python_version'] or '?'}, systemd: {systemd})"
    ]
    for f in report.get("files", []):
        state = "written" if f["changed"] else "unchanged"
        out.append(f"  {f['path']}  mode {f['mode']}  {f['bytes']} bytes  {state}")
    out += [f"  removed {path}" for path in report.get("removed", [])]
    if report["action"] == "install":
        out.append(f"  agent token: {report['token']}; collector URL {report['collector_url']}")
    out += [f"  kept {path} (the agent's sequence state)" for path in report.get("kept", [])]
    reason = report.get("not_started") or report.get("not_run")
    if reason:
        out.append(reason + "; to finish on the host, run:")
        out += [f"    {command}" for command in report["would_run"]]
    heartbeat = report.get("heartbeat")
    if heartbeat:
        out.append(f"first batch: agent {heartbeat['agent_version']} (pid {heartbeat['pid']})")
        out.append(f"  sampling: {', '.join(heartbeat['sampling']) or 'no sample yet'}")
        out += [f"  {s['source']}: {s['info']}" for s in heartbeat["sources_off"]]
        out += [f"  {s['source']} error: {s['error']}" for s in heartbeat["source_errors"]]
    out += [f"  agent log: {line}" for line in report.get("agent_log") or []]
    out += [f"warning: {w}" for w in report.get("warnings", [])]
    return "\n".join(out)


def run_deploy_cli(
    args: argparse.Namespace,
    *,
    ssh: SSHClient | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """0 when done (or installed without starting), 2 when the started agent was not heard
    from, 1 on an error."""
    out, err = out or sys.stdout, err or sys.stderr
    settings = Settings(**({"db_url": args.db_url} if getattr(args, "db_url", None) else {}))
    db.migrate(settings.db_url)
    engine = db.make_engine(settings.db_url)
    options = DeployOptions(
        netconsole=args.netconsole is not None,
        netconsole_to=args.netconsole or None,
        collector_url=args.collector_url,
        start=not args.no_start,
        root=args.root,
        wait_s=args.wait,
    )
    factory, ssh = db.make_sessionmaker(engine), ssh or SSHClient()
    report: InstallReport | UninstallReport
    try:
        if args.uninstall:
            report = uninstall_agent(factory, name=args.name, ssh=ssh, options=options)
        else:
            report = deploy_agent(
                factory, name=args.name, ssh=ssh, settings=settings, options=options
            )
    except AppError as exc:
        err.write(f"error: {exc.detail}\n")
        return 1
    finally:
        engine.dispose()
    data = report.model_dump(mode="json")
    out.write((json.dumps(data, indent=2) if args.json else report_text(data)) + "\n")
    return 2 if data.get("started") and not data.get("heartbeat") else 0
