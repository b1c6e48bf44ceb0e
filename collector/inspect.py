"""Offline inspection of saved logs: `freezewatch-collector inspect kernel-log|vllm-log FILE`.

Kernel logs are accepted in any common shape: dmesg (monotonic, `-T`, `--time-format iso`,
`-x`, `-r`), syslog or `journalctl -k` text (short, short-iso, short-precise,
short-monotonic), `journalctl -o json` export, raw `/dev/kmsg` records, or bare lines.
A record continued on indented lines is one record.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from collector.kernel.classify import classify_kernel_line
from collector.vllm.log_parser import parse_vllm_log

_PRIO = re.compile(r"^<\d{1,3}>")
_KMSG = re.compile(r"^\d+,\d+,\d+,[^;]*;")
_DMESG_X = re.compile(r"^[a-z]+\s*:[a-z]+\s*: ")
_MONO = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_CTIME = re.compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}\]\s?")
_ISO = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s")
_SYSLOG = re.compile(r"^[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?\s")
# After a journal/syslog timestamp: "host ident[pid]: ".
_HOST_IDENT = re.compile(r"^\S+ [\w.@/-]+(?:\[\d+\])?: ")
_HOST_KERNEL = re.compile(r"^\S+ kernel: ")


def kernel_message(line: str) -> str:
    """The kernel message of one log line, with any dmesg/syslog/journal/kmsg prefix removed."""
    text = _PRIO.sub("", line, count=1)
    m = _KMSG.match(text)
    if m:
        return text[m.end() :]
    text = _DMESG_X.sub("", text, count=1)
    m = _MONO.match(text)
    if m:  # dmesg, or journalctl -o short-monotonic ("[  12.3] host kernel: ...")
        text = text[m.end() :]
        k = _HOST_KERNEL.match(text)
        return text[k.end() :] if k else text
    m = _CTIME.match(text)
    if m:  # dmesg -T
        return text[m.end() :]
    m = _ISO.match(text) or _SYSLOG.match(text)
    if m:
        text = text[m.end() :]
        # dmesg --time-format iso writes a comma fraction and no host; journals add "host ident: ".
        if "," not in m.group(0):
            h = _HOST_IDENT.match(text)
            if h:
                text = _MONO.sub("", text[h.end() :], count=1)
    return text


def _json_message(line: str) -> str | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = obj.get("MESSAGE")
    if isinstance(msg, list):  # journald exports non-UTF-8 / non-printable values as bytes
        try:
            return bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    return msg if isinstance(msg, str) else ""


def kernel_records(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(1-based line where the record starts, message text) for each record in a kernel log."""
    start: int | None = None
    parts: list[str] = []
    for index, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if line[:1] in (" ", "\t") and start is not None:
            parts.append(line.strip())
            continue
        if start is not None:
            yield start, "\n".join(parts)
        start, parts = None, []
        if not line.strip():
            continue
        if line.startswith("{"):
            msg = _json_message(line)
            if msg is not None:
                yield index, msg
                continue
        start, parts = index, [kernel_message(line)]
    if start is not None:
        yield start, "\n".join(parts)


def inspect_kernel_log(path: str | Path) -> list[dict[str, Any]]:
    """The classified kernel events of a saved log, one dict per event (the --json contract)."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    events = []
    for line_no, text in kernel_records(lines):
        event = classify_kernel_line(text.replace("\n", " "))
        if event is None:
            continue
        events.append(
            {
                "kind": event.kind,
                "xid": event.xid,
                "pci": event.pci,
                "pid": event.pid,
                "process": event.process,
                "meaning": event.meaning,
                "line_no": line_no,
                "text": text,
            }
        )
    return events


def inspect_vllm_log(path: str | Path) -> list[dict[str, Any]]:
    """The startup plan of every server start in a saved vLLM log (the --json contract)."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    return [plan.to_dict() for plan in parse_vllm_log(lines)]


def add_inspect_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `inspect kernel-log|vllm-log FILE [--json]` on a CLI's subparsers."""
    parser = subparsers.add_parser("inspect", help="classify a saved kernel or vLLM log")
    kinds = parser.add_subparsers(dest="inspect_kind", required=True)
    for name, help_text in (
        ("kernel-log", "kernel events in dmesg/journalctl/kmsg text"),
        ("vllm-log", "vLLM startup plans and phases"),
    ):
        sub = kinds.add_parser(name, help=help_text)
        sub.add_argument("file", help="the saved log file")
        sub.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run_inspect)
    return parser


def run_inspect(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run `inspect`; 0 on success, 2 when the file cannot be read."""
    out = out or sys.stdout
    try:
        if args.inspect_kind == "kernel-log":
            result = inspect_kernel_log(args.file)
            render = _render_kernel
        else:
            result = inspect_vllm_log(args.file)
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
        head = e["kind"] + (f" {e['xid']}" if e["xid"] is not None else "")
        extra = ", ".join(f"{k}={e[k]}" for k in ("pci", "pid", "process") if e[k] is not None)
        out.write(f"line {e['line_no']}: {head}" + (f" ({extra})" if extra else ""))
        out.write(f": {e['meaning']}\n" if e["meaning"] else "\n")
        out.write(f"    {e['text'].splitlines()[0] if e['text'] else ''}\n")
    out.write(f"{len(events)} event(s)\n")


def _render_vllm(plans: list[dict[str, Any]], out: TextIO) -> None:
    if not plans:
        out.write("no vLLM server start found\n")
    for number, plan in enumerate(plans, start=1):
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
        if plan["error"]:
            out.write(f"  error: {plan['error']}\n")
        out.write("  phases:\n")
        for phase in plan["phases"]:
            when = phase.get("log_time") or ""
            out.write(f"    line {phase['line_no']:>6}  {when:14}  {phase['phase']}\n")
