"""freezewatch-collector: serve | migrate | add-host | deploy-agent | demo | inspect | matrix |
agent-bundle | guard | storage."""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from collector import db, workers
from collector.demo import run_demo
from collector.deploy.bundle import build_agent_bundle
from collector.deploy.cli import add_deploy_parser, run_deploy_cli
from collector.errors import AppError
from collector.guard.cli import add_guard_parser, run_guard_cli
from collector.hosts import arguments, registry
from collector.hosts.config import HostPatch, PowerControl, configure_host, set_power, set_retention
from collector.hosts.labels import set_labels
from collector.inspect import add_inspect_parser, run_inspect
from collector.matrix.cli import add_matrix_parser, run_matrix_cli
from collector.remote.ssh import SSHClient
from collector.retention.cli import add_storage_parser, run_storage_cli
from collector.serve import configure_logging, serve
from collector.settings import Settings

log = logging.getLogger("freezewatch")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="freezewatch-collector", description=__doc__)
    parser.add_argument("--db", dest="db_url", help="database URL (env FREEZEWATCH_DB_URL)")
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser("serve", help="run the collector (migrates first)")
    server.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    server.add_argument("--bind", help="address to listen on (default 127.0.0.1)")
    server.add_argument("--port", type=int, help="port (default 8080)")
    server.add_argument("--log-level", default="info")
    server.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="collector processes on the one port, PostgreSQL only (env FREEZEWATCH_WORKERS; 1)",
    )

    migrate = sub.add_parser("migrate", help="upgrade the database schema to head")
    migrate.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)

    add = sub.add_parser("add-host", help="register a host and print its agent token once")
    add.add_argument("name")
    add.add_argument("--db", dest="db_url", default=argparse.SUPPRESS)
    add.add_argument("--simulated", action="store_true", help=argparse.SUPPRESS)
    add.add_argument(
        "--rotate-token", action="store_true", help="issue a new token for an existing host"
    )
    add.add_argument("--ssh", metavar="USER@ADDR[:PORT]", help="how the collector logs in")
    add.add_argument("--key", metavar="PATH", help="private key file for --ssh")
    add.add_argument("--vllm-url", metavar="URL", help="vLLM base URL probed at /health")
    add.add_argument(
        "--trust-host-key",
        action="store_true",
        help="fetch the host's SSH key now and trust it (prints the fingerprint)",
    )
    add.add_argument(
        "--restart-agent",
        action="store_true",
        help="on agent_down, run `systemctl restart freezewatch-agent` over SSH",
    )
    add.add_argument("--grace", type=float, metavar="S", help="per-host grace in seconds")
    add.add_argument(
        "--update",
        action="store_true",
        help="change the settings of an existing host instead of registering it",
    )
    add.add_argument(
        "--netconsole-from",
        action="append",
        default=[],
        metavar="ADDR",
        help="source IP the host's netconsole sends from (repeatable)",
    )

    add.add_argument(
        "--power-cycle",
        metavar="JSON_ARGV",
        help="command run here to power-cycle a host that stays away during a matrix campaign, "
        'e.g. \'["ipmitool", "-H", "bmc", "chassis", "power", "cycle"]\' ("" removes it)',
    )
    add.add_argument(
        "--retain",
        action="append",
        default=[],
        metavar="KIND=DAYS",
        help="keep this host's KIND DAYS days (0: until deleted, '': the default; repeatable)",
    )
    add.add_argument(
        "--power-after", type=float, metavar="S", help="seconds without the host first (300)"
    )
    add.add_argument("--label", action="append", default=[], metavar="K=V", help="K= removes K")

    bundle = sub.add_parser(
        "agent-bundle", help="build the agent's single-file zipapp (agent + nvidia-ml-py)"
    )
    bundle.add_argument("out", metavar="OUT.pyz")
    bundle.add_argument(
        "--no-nvml", action="store_true", help="leave pynvml out even when it is installed"
    )

    add_deploy_parser(sub)

    demo = sub.add_parser("demo", help="collector on SQLite plus an agent watching this machine")
    demo.add_argument("--data-dir", default="demo-data")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument(
        "--sim-command",
        action="append",
        default=[],
        help="extra process to run beside the demo (repeatable; argv as a JSON list; "
        "{url} {port} {data} {python} {token:NAME} are filled in)",
    )
    demo.add_argument(
        "--simulated-host",
        action="append",
        default=[],
        metavar="NAME",
        help="register NAME as a simulated host (token for --sim-command as {token:NAME})",
    )
    add_matrix_parser(sub)
    add_inspect_parser(sub)
    add_guard_parser(sub)
    add_storage_parser(sub)
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings, the command line's over the environment's; exits 2 on a bad one."""
    names = ("db_url", "bind", "port", "workers")
    # An empty value is no value (a --bind "" must not mean every interface); 0 is one.
    overrides = {k: v for k in names if (v := getattr(args, k, None)) not in (None, "")}
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"error: invalid setting ({wrong})", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if settings.workers == 1:
        return serve(settings, log_level=args.log_level)
    if problem := workers.problem(settings):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return workers.run(settings, log_level=args.log_level)


def cmd_migrate(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    db.migrate(settings.db_url)
    print(f"database at head: {settings.db_url}")
    return 0


def cmd_add_host(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    db.migrate(settings.db_url)
    engine = db.make_engine(settings.db_url)
    token: str | None = None
    try:
        patch = HostPatch(
            netconsole_from=args.netconsole_from, retention=arguments.retain(args.retain)
        )
        addrs = patch.netconsole_from or []
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            if args.rotate_token or args.update:
                host = registry.get_host(session, name=args.name)
                if args.rotate_token:
                    token = registry.rotate_token(session, host=host)
            else:
                host, token = registry.create_host(
                    session, name=args.name, simulated=args.simulated, netconsole_from=addrs
                )
            if (args.update or args.rotate_token) and addrs:
                registry.set_netconsole_from(session, host=host, addrs=addrs)
            facts = configure_host(
                session,
                host=host,
                fetch_key=SSHClient().fetch_host_key,
                ssh=args.ssh,
                key_path=args.key,
                trust_host_key=args.trust_host_key,
                vllm_url=args.vllm_url,
                grace_s=args.grace,
                restart_agent=True if args.restart_agent else None,
            )
            if patch.retention:
                set_retention(session, host=host, changes=patch.retention)
            if args.label:
                set_labels(session, host=host, changes=arguments.labels(args.label))
            if args.power_cycle is not None:
                set_power(session, host=host, power=_power(args.power_cycle, args.power_after))
    except AppError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        return 1
    except ValidationError as exc:
        print(f"error: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 1
    except OSError as exc:  # SSHError included: the host key could not be fetched
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    if "host_key_fingerprint" in facts:
        print(f"trusted SSH host key {facts['host_key_fingerprint']}")
    if token is None:
        print(f"host {args.name!r} updated")
        return 0
    done = "registered"
    if args.rotate_token:
        done = "has a new agent token, the old one no longer works"
    print(f"host {args.name!r} {done}; agent token (shown once, stored hashed):")
    print(token)
    return 0


def _power(argv_json: str, after_s: float | None) -> PowerControl | None:
    if not argv_json:
        return None
    try:
        argv = json.loads(argv_json)
    except ValueError as exc:
        raise AppError(f"--power-cycle is not a JSON argv list: {exc}") from None
    return PowerControl(cycle=argv, **({"after_s": after_s} if after_s is not None else {}))


def cmd_agent_bundle(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    build_agent_bundle(out, include_nvml=not args.no_nvml)
    with zipfile.ZipFile(out) as zf:
        nvml = "pynvml.py" in zf.namelist()
    print(f"agent bundle written: {out} ({out.stat().st_size} bytes, pynvml: {nvml})")
    print(f"run it with: python3 {out.name} --collector URL --token TOKEN")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(
        data_dir=args.data_dir,
        port=args.port,
        sim_commands=args.sim_command,
        simulated_hosts=args.simulated_host,
    )


COMMANDS = {
    "serve": cmd_serve,
    "migrate": cmd_migrate,
    "add-host": cmd_add_host,
    "agent-bundle": cmd_agent_bundle,
    "deploy-agent": run_deploy_cli,
    "demo": cmd_demo,
    "matrix": run_matrix_cli,
    "inspect": run_inspect,
    "guard": run_guard_cli,
    "storage": run_storage_cli,
}


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:  # Ctrl-C before a command takes it over (serve: while migrating)
        return 130
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # the command's own connection broke (SSH, a socket): an error to show
        # `freezewatch-collector ... | head`: the reader left; a traceback (twice, the second
        # from flushing stdout at exit) would bury the output it did read.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _stdout_gone() -> bool:
    """Whether stdout's reader has left: a pipe or socket with no reader polls as an error."""
    poll = getattr(select, "poll", None)
    if poll is None:  # no poll() here: take the broken pipe for stdout's, as before
        return True
    try:
        poller = poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(mask & (select.POLLERR | select.POLLHUP) for _fd, mask in poller.poll(0))
    except (OSError, ValueError):  # stdout closed or replaced by something without a file
        return True


if __name__ == "__main__":
    sys.exit(main())
