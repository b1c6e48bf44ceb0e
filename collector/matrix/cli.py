"""`freezewatch-collector matrix preset NAME` and `matrix argv SPEC PROFILE`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from collector.matrix.argv import remote_argv
from collector.matrix.presets import DEFAULT_HOST, preset_names, preset_yaml
from collector.matrix.spec import SpecError, load_spec
from collector.remote.commands import remote_command, shell_join


def add_matrix_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the `matrix` command (dispatch with `run_matrix_cli`)."""
    parser = subparsers.add_parser("matrix", help="matrix specs: presets and remote argv")
    sub = parser.add_subparsers(dest="matrix_command", required=True)
    preset = sub.add_parser("preset", help="print a built-in preset as YAML")
    preset.add_argument("name", help=f"one of: {', '.join(preset_names())}")
    preset.add_argument("--host", default=DEFAULT_HOST, help="registered host to put in the spec")
    argv = sub.add_parser(
        "argv", help="print the exact command line the runner starts on the host for a profile"
    )
    argv.add_argument("spec", help="spec file (YAML or JSON)")
    argv.add_argument("profile")
    argv.add_argument(
        "--json", action="store_true", help="print a JSON list instead (~/ as in the spec)"
    )
    argv.add_argument(
        "--exec",
        action="store_true",
        help="print the whole SSH exec request (the process-group wrapper included)",
    )
    return parser


def run_matrix_cli(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run a parsed `matrix` command; 0 on success, 2 on a bad spec, preset or profile."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if args.matrix_command == "preset":
            out.write(preset_yaml(args.name, args.host))
            return 0
        argv = remote_argv(load_spec(args.spec), args.profile)
    except SpecError as exc:
        err.write(f"error: {exc}\n")
        return 2
    if args.json:
        text = json.dumps(argv)
    else:
        text = remote_command(argv) if args.exec else shell_join(argv)
    out.write(text + "\n")
    return 0
