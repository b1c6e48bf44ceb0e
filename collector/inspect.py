"""Offline inspection of saved logs: `freezewatch-collector inspect kernel-log|vllm-log FILE`.

Kernel logs are accepted in any common shape (``agent.kernel.prefix``): dmesg in any time
style, syslog or ``journalctl -k`` text, ``journalctl -o json`` export, raw ``/dev/kmsg``
records, pstore files, cluster log shippers' lines, or bare lines. Each event is printed with
its kind, code, device, meaning, severity and action. vLLM logs give every server start's plan
and outcome, and the hang signals with the phase each came in.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from collector.kernel.records import log_event_dicts
from collector.vllm.log_config import CONFIG_FIELDS
from collector.vllm.log_parser import VllmLogParser
from collector.vllm.plan import StartupPlan


def inspect_kernel_log(path: str | Path) -> list[dict[str, Any]]:
    """The classified kernel events of a saved log, one dict per event (the --json contract)."""
    return log_event_dicts(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())


def inspect_vllm_log(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The --json contract: ``starts``, the plan of every server start in a saved vLLM log,
    and ``hang_signals``, each with its line number, the phase and the start it came in (the
    1-based start number, None before the first)."""
    plans, signals = read_vllm_log(path)
    return {"starts": [plan.to_dict() for plan in plans], "hang_signals": signals}


def read_vllm_log(path: str | Path) -> tuple[list[StartupPlan], list[dict[str, Any]]]:
    """Every start's whole plan and the hang signals. A leading block of ``#`` comment lines
    (an annotated capture's header: no vLLM line starts so) is not log: its prose quoting an
    error would become the start's error. A signal held from before the first start
    (``log_held``) is reported at its own line, in no start."""
    parser = VllmLogParser()
    signals = []
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    in_header = True
    for line_no, line in enumerate(text.splitlines(), start=1):
        in_header = in_header and line.startswith("#")
        if in_header:
            continue
        for fact in parser.feed(line, line_no=line_no):
            if fact.kind == "hang_signal":
                start = None if fact.held else len(parser.plans()) or None
                signals.append({"line_no": fact.line_no, "start": start, **fact.data})
    for fact in parser.finish():
        signals.append({"line_no": fact.line_no, "start": None, **fact.data})
    return parser.plans(), signals


def add_inspect_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Register `inspect kernel-log|vllm-log FILE [--json]` on a CLI's subparsers."""
    parser = subparsers.add_parser("inspect", help="classify a saved kernel or vLLM log")
    kinds = parser.add_subparsers(dest="inspect_kind", required=True)
    for name, help_text in (
        ("kernel-log", "kernel events in dmesg/journalctl/kmsg/pstore text"),
        ("vllm-log", "vLLM startup plans, outcomes and hang signals"),
    ):
        sub = kinds.add_parser(name, help=help_text)
        sub.add_argument("file", help="the saved log file")
        sub.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run_inspect)
    return parser


def run_inspect(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run `inspect`; 0 on success, 2 when the file cannot be read."""
    out = out or sys.stdout
    result: Any
    render: Callable[[Any, TextIO], None]
    try:
        if args.inspect_kind == "kernel-log":
            result = inspect_kernel_log(args.file)
            render = _render_kernel
        elif args.json:
            result = inspect_vllm_log(args.file)
        else:
            result = read_vllm_log(args.file)
            render = _render_vllm
    except OSError as exc:
        print(f"inspect: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(result, out, indent=2)
        out.write("\n")
    else:
        render(result, out)
    return 0


def _render_kernel(events: list[dict[str, Any]], out: TextIO) -> None:
    if not events:
        out.write("no kernel events\n")
    for e in events:
        head = e["kind"] + (f" {e['code']}" if e["code"] is not None else "")
        extra = ", ".join(
            f"{k}={e[k]}" for k in ("device", "module", "pid", "process") if e[k] is not None
        )
        out.write(f"line {e['line_no']}: {head}" + (f" ({extra})" if extra else ""))
        out.write(f": {e['meaning']}\n" if e["meaning"] else "\n")
        out.write(f"    severity {e['severity']}, action {e['action']}\n")
        out.write(f"    {e['text'].splitlines()[0] if e['text'] else ''}\n")
    out.write(f"{len(events)} event(s)\n")


def _render_vllm(result: tuple[list[StartupPlan], list[dict[str, Any]]], out: TextIO) -> None:
    starts, signals = result
    if not starts:
        out.write("no vLLM server start found\n")
    for number, start in enumerate(starts, start=1):
        plan = start.to_dict()
        out.write(f"server start {number}: {plan['outcome']}")
        out.write(f" (vLLM {plan['vllm_version']})\n" if plan["vllm_version"] else "\n")
        for key, value in plan.items():
            if key in ("outcome", "vllm_version", "phases", "error"):
                continue
            shown = "-" if value is None else value
            flag = (
                "  <- negative estimate"
                if key == "cuda_graph_estimate_gib" and (value is not None and value < 0)
                else ""
            )
            out.write(f"  {key:32} {shown}{flag}\n")
        stated = {name: getattr(start, name) for name in CONFIG_FIELDS}
        if any(value is not None for value in stated.values()):
            out.write("  configuration the log states:\n")
            for name, value in stated.items():
                if value is not None:
                    out.write(f"    {name:30} {value}\n")
        if plan["error"]:
            out.write(f"  error: {plan['error']}\n")
        out.write("  phases:\n")
        for phase in plan["phases"]:
            when = phase.get("log_time") or ""
            out.write(f"    line {phase['line_no']:>6}  {when:14}  {phase['phase']}\n")
    for signal in signals:
        where = f"start {signal['start']}, " if signal["start"] else ""
        out.write(
            f"hang signal line {signal['line_no']}: {signal['signal']}"
            f" ({where}phase {signal['phase'] or 'unknown'})\n"
        )
