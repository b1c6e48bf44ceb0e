"""The guard's configuration: rules over samples and kernel records, actions, cooldown.

A rules document (JSON or YAML, see ``rulesfile``)::

    cooldown: 5m                       # at most one firing per 5 minutes (default 5m)
    phases: [loading_weights, serving] # optional: rules count only in these vLLM phases
    rules:
      - mem_available_below: 4GiB for 2s
      - psi_memory_full_avg10_above: 20 for 3s
      - swap_used_growth_above: 1GiB/10s
      - kernel_event: [nv_err NV_ERR_NO_MEMORY, xid fatal]
      - {mem_available_below: 2GiB, phases: [serving]}   # a rule's own phases
    actions:                           # in order; none is run that is not listed here
      - docker_stop: {timeout: 10s, kill_after: 5s}
      - signal: {cmdline_contains: "vllm serve", signal: SIGTERM, kill_after: 10s, fallback: true}
      - unit: {name: vllm.service, signal: SIGTERM, kill_after: 10s, fallback: true}
      - command: {argv: [/usr/local/bin/page-me, guard], timeout: 30s}

Everything is checked when the document is read; an unknown key, unit or kind is an error,
never ignored (a typo must not silently change what the guard does).
"""

from __future__ import annotations

import re
import signal as signal_module
from dataclasses import dataclass, field
from typing import Any

from agent.wire import KERNEL_EVENT_KINDS, VLLM_PHASES

DEFAULT_COOLDOWN_S = 300.0
SIZES = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
SIZES |= {f"{u}ib": v for u, v in SIZES.items() if u not in ("", "b")}
SIZES |= {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
DURATIONS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_PSI = re.compile(r"^psi_(memory|cpu|io)_(some|full)_avg(10|60|300)_above$")
ACTION_OPTIONS = {
    "docker_stop": {"timeout": "10s", "kill_after": "5s", "container": None},
    "signal": {
        "cmdline_contains": None,
        "pid_file": None,
        "signal": "SIGTERM",
        "kill_after": "10s",
    },
    "unit": {"name": None, "signal": "SIGTERM", "kill_after": "10s", "systemctl": "systemctl"},
    "command": {"argv": None, "timeout": "30s"},
}


class GuardConfigError(ValueError):
    """The rules document says something the guard will not guess about."""


@dataclass(frozen=True)
class KernelMatch:
    """``xid fatal``, ``xid 79``, ``nv_err NV_ERR_NO_MEMORY``, ``oom_kill``..."""

    kind: str
    qualifier: str | int | None = None


@dataclass(frozen=True)
class Rule:
    """One condition. ``metric`` rules hold for ``hold_s`` (growth: within ``hold_s``)."""

    text: str  # as the user wrote it: "mem_available_below: 4GiB for 2s" (the rule's name)
    kind: str  # mem_available_below | psi_above | swap_used_growth_above | kernel_event
    threshold: float = 0.0
    hold_s: float = 0.0
    psi: tuple[str, str, str] | None = None  # (resource, some|full, avg10|avg60|avg300)
    kernel: tuple[KernelMatch, ...] = ()
    phases: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Action:
    kind: str  # docker_stop | signal | unit | command
    options: dict[str, Any] = field(default_factory=dict)  # durations already in seconds
    fallback: bool = False  # run only when every action before it failed

    def describe(self) -> str:
        shown = {k: v for k, v in self.options.items() if v is not None and k != "systemctl"}
        words = " ".join(f"{k}={v}" for k, v in shown.items())
        return f"{self.kind}{' ' + words if words else ''}{' (fallback)' if self.fallback else ''}"


@dataclass(frozen=True)
class GuardConfig:
    rules: tuple[Rule, ...]
    actions: tuple[Action, ...]
    cooldown_s: float = DEFAULT_COOLDOWN_S
    phases: tuple[str, ...] | None = None
    dry_run: bool = False
    source: str = ""

    def summary(self) -> dict[str, Any]:
        """What ``agent_started`` reports as ``guard``."""
        return {
            "state": "dry_run" if self.dry_run else "armed",
            "rules": [r.text for r in self.rules],
            "actions": [a.describe() for a in self.actions],
            "cooldown_s": self.cooldown_s,
            "phases": list(self.phases) if self.phases is not None else None,
            "source": self.source,
        }


def parse_size(text: Any, where: str) -> float:
    """``4GiB`` (binary; ``4G`` too, as Docker reads it), ``4GB`` (decimal), bytes."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    m = _QUANTITY.match(str(text))
    if m is None or m.group(2).lower() not in SIZES:
        raise GuardConfigError(f"{where}: {text!r} is not a size such as 4GiB or 512MiB")
    return float(m.group(1)) * SIZES[m.group(2).lower()]


def parse_duration(text: Any, where: str) -> float:
    """``2s``, ``500ms``, ``5m``, ``1h``; a bare number is seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        m = _QUANTITY.match(str(text))
        if m is None or m.group(2).lower() not in DURATIONS:
            raise GuardConfigError(f"{where}: {text!r} is not a duration such as 2s or 5m")
        seconds = float(m.group(1)) * DURATIONS[m.group(2).lower()]
    return seconds


def _phases(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        raise GuardConfigError(f"{where}: a list of vLLM phases, e.g. [loading_weights]")
    unknown = [n for n in names if n not in VLLM_PHASES]
    if unknown:
        raise GuardConfigError(f"{where}: unknown vLLM phase {unknown[0]!r} ({VLLM_PHASES})")
    return tuple(names)


def _threshold_for(value: Any, where: str, size: bool) -> tuple[float, float]:
    text = str(value)
    head, sep, tail = text.partition(" for ")
    threshold = parse_size(head, where) if size else _number(head, where)
    return threshold, parse_duration(tail, where) if sep else 0.0


def _number(text: Any, where: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise GuardConfigError(f"{where}: {text!r} is not a number") from None


def _kernel_matches(value: Any, where: str) -> tuple[KernelMatch, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise GuardConfigError(f"{where}: a list such as [nv_err NV_ERR_NO_MEMORY, xid fatal]")
    out = []
    for item in items:
        kind, _, qualifier = str(item).strip().partition(" ")
        qualifier = qualifier.strip()
        if kind not in KERNEL_EVENT_KINDS:
            raise GuardConfigError(f"{where}: unknown kernel event kind {kind!r}")
        if kind == "xid" and qualifier:
            if qualifier != "fatal" and not qualifier.isdigit():
                raise GuardConfigError(f"{where}: 'xid fatal' or 'xid <code>', not {item!r}")
            out.append(KernelMatch(kind, int(qualifier) if qualifier.isdigit() else "fatal"))
        elif kind == "aer" and qualifier:  # a non-fatal one leaves the link up
            if qualifier != "fatal":
                raise GuardConfigError(f"{where}: 'aer' or 'aer fatal', not {item!r}")
            out.append(KernelMatch(kind, "fatal"))
        elif kind == "nv_err" and qualifier:
            if not re.fullmatch(r"NV_ERR_[A-Z0-9_]+", qualifier):
                raise GuardConfigError(f"{where}: 'nv_err NV_ERR_<NAME>', not {item!r}")
            out.append(KernelMatch(kind, qualifier))
        elif qualifier:
            raise GuardConfigError(f"{where}: {kind} takes no qualifier ({item!r})")
        else:
            out.append(KernelMatch(kind))
    return tuple(out)


def parse_rule(entry: Any, where: str) -> Rule:
    """One ``rules`` entry: a mapping of one rule key (plus ``phases``)."""
    if not isinstance(entry, dict):
        raise GuardConfigError(
            f"{where}: a rule is a mapping such as {{mem_available_below: 4GiB}}"
        )
    phases = _phases(entry.get("phases"), f"{where}.phases")
    keys = [k for k in entry if k != "phases"]
    if len(keys) != 1:
        raise GuardConfigError(f"{where}: one rule per entry, got {keys}")
    kind, value = keys[0], entry[keys[0]]
    at = f"{where}.{kind}"
    # A rule's own phases are part of what it is: the check, the host page and firings show them.
    text = f"{kind}: {_flat(value)}" + (f", phases: {_flat(list(phases))}" if phases else "")
    if kind == "mem_available_below":
        threshold, hold = _threshold_for(value, at, size=True)
        return Rule(text, kind, threshold, hold, phases=phases)
    if (m := _PSI.match(kind)) is not None:
        threshold, hold = _threshold_for(value, at, size=False)
        psi = (m.group(1), m.group(2), f"avg{m.group(3)}")
        return Rule(text, "psi_above", threshold, hold, psi=psi, phases=phases)
    if kind == "swap_used_growth_above":
        size, sep, window = str(value).partition("/")
        if not sep:
            raise GuardConfigError(f"{at}: growth over a window, e.g. 1GiB/10s")
        return Rule(text, kind, parse_size(size, at), parse_duration(window, at), phases=phases)
    if kind == "kernel_event":
        return Rule(text, kind, kernel=_kernel_matches(value, at), phases=phases)
    raise GuardConfigError(f"{where}: unknown rule {kind!r}")


def _flat(value: Any) -> str:
    return ", ".join(map(str, value)).join("[]") if isinstance(value, list) else str(value)


def parse_action(entry: Any, where: str) -> Action:
    if isinstance(entry, str):
        entry = {entry: {}}
    if not isinstance(entry, dict) or len(entry) != 1:
        raise GuardConfigError(f"{where}: one action per entry, e.g. {{docker_stop: {{}}}}")
    kind, given = next(iter(entry.items()))
    if kind not in ACTION_OPTIONS:
        raise GuardConfigError(f"{where}: unknown action {kind!r} ({', '.join(ACTION_OPTIONS)})")
    given = dict(given or {})
    fallback = bool(given.pop("fallback", False))
    unknown = set(given) - set(ACTION_OPTIONS[kind])
    if unknown:
        raise GuardConfigError(f"{where}.{kind}: unknown option {sorted(unknown)[0]!r}")
    options = {**ACTION_OPTIONS[kind], **given}
    for key in ("timeout", "kill_after"):
        if key in options:
            options[key] = parse_duration(options[key], f"{where}.{kind}.{key}")
    _check_action(kind, options, f"{where}.{kind}")
    return Action(kind, options, fallback)


def _check_action(kind: str, options: dict[str, Any], where: str) -> None:
    if "signal" in options:
        name = str(options["signal"]).upper()
        name = name if name.startswith("SIG") else f"SIG{name}"
        if not isinstance(getattr(signal_module, name, None), signal_module.Signals):
            raise GuardConfigError(f"{where}.signal: unknown signal {options['signal']!r}")
        options["signal"] = name
    if kind == "signal" and bool(options["cmdline_contains"]) == bool(options["pid_file"]):
        raise GuardConfigError(f"{where}: give cmdline_contains or pid_file (one of them)")
    if kind == "unit" and not options["name"]:
        raise GuardConfigError(f"{where}: name of the systemd unit is missing")
    if kind == "command":
        argv = options["argv"]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise GuardConfigError(f"{where}.argv: a list of strings, e.g. [/usr/bin/x, arg]")


TOP_KEYS = ("rules", "actions", "cooldown", "phases", "dry_run")


def parse_config(data: Any, *, dry_run: bool = False, source: str = "") -> GuardConfig:
    """A rules document → GuardConfig; ``dry_run`` (the flag) wins over the document's false."""
    if not isinstance(data, dict):
        raise GuardConfigError(f"{source or 'rules'}: a mapping with rules: and actions:")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise GuardConfigError(f"unknown key {unknown[0]!r} (known: {', '.join(TOP_KEYS)})")
    rules_in, actions_in = data.get("rules") or [], data.get("actions") or []
    if not isinstance(rules_in, list) or not rules_in:
        raise GuardConfigError("rules: at least one rule")
    if not isinstance(actions_in, list):
        raise GuardConfigError("actions: a list")
    dry_run = dry_run or bool(data.get("dry_run", False))
    actions = tuple(parse_action(a, f"actions[{i}]") for i, a in enumerate(actions_in))
    if not actions and not dry_run:
        raise GuardConfigError("no actions: list what to do, or use --guard-dry-run to only report")
    cooldown = parse_duration(data.get("cooldown", DEFAULT_COOLDOWN_S), "cooldown")
    return GuardConfig(
        rules=tuple(parse_rule(r, f"rules[{i}]") for i, r in enumerate(rules_in)),
        actions=actions,
        cooldown_s=cooldown,
        phases=_phases(data.get("phases"), "phases"),
        dry_run=dry_run,
        source=source,
    )
