"""The guard's decisions: every sample and kernel record against the rules, at most one firing
per cooldown, the firing's actions handed to their own thread at once.

A sample rule ``... for D`` trips on the sample that shows its condition held for ``D``
(every sample since the first true one true; a sample within ``JITTER_S`` of ``D`` counts, for
scheduling jitter, never a full sample earlier); a value a sample lacks breaks the streak.
``swap_used_growth_above: X/W`` trips when swap used is more than X above its lowest value of
the last W. Kernel records trip at once, but only those written after the guard was armed (the
kernel's ring buffer read at start is history, not news). A rule limited to vLLM phases counts
only while vLLM is in one of them (outside, its streak is broken); the phase is unknown, so no
such rule counts, until vLLM's log or ``/health`` said it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.guard.actions import ActionContext, run_actions
from agent.guard.kernel import match_record, matches
from agent.guard.phase import PhaseTracker
from agent.guard.rules import GuardConfig, Rule

log = logging.getLogger(__name__)

JITTER_S = 0.05
OnEvent = Callable[[str, dict[str, Any]], None]


def _mem(sample: dict[str, Any], key: str) -> float | None:
    value = (sample.get("mem") or {}).get(key)
    return value if isinstance(value, int | float) else None


def swap_used(sample: dict[str, Any]) -> float | None:
    total, free = _mem(sample, "SwapTotal"), _mem(sample, "SwapFree")
    return None if total is None or free is None else total - free


def psi_value(sample: dict[str, Any], rule: Rule) -> float | None:
    assert rule.psi is not None
    resource, kind, avg = rule.psi
    value = (((sample.get("psi") or {}).get(resource) or {}).get(kind) or {}).get(avg)
    return value if isinstance(value, int | float) else None


class ActionRunner:
    """One thread that runs a firing's actions, then reports them as ``guard_result``."""

    def __init__(self, context: ActionContext, on_event: OnEvent, state_path: Path | None) -> None:
        self.context = context
        self._on_event = on_event
        self._state_path = state_path
        self._queue: queue.Queue[tuple[dict[str, Any], GuardConfig]] = queue.Queue()
        self.done = threading.Event()  # set after each firing's result was reported (tests)
        threading.Thread(target=self._run, name="guard-actions", daemon=True).start()

    def submit(self, firing: dict[str, Any], config: GuardConfig) -> None:
        self.done.clear()
        self._queue.put((firing, config))

    def _run(self) -> None:
        while True:
            firing, config = self._queue.get()
            results = run_actions(config.actions, self.context, firing)
            for r in results:
                log.warning(
                    "guard %s: %s ok=%s %s", firing["fire_id"], r["action"], r["ok"], r["detail"]
                )
            data = {"fire_id": firing["fire_id"], "rule": firing["rule"], "results": results}
            self._on_event("guard_result", data)
            self._save(firing)
            self.done.set()

    def _save(self, firing: dict[str, Any]) -> None:
        """The last firing's time, so a restarted agent keeps the cooldown."""
        if self._state_path is None:
            return
        tmp = self._state_path.with_suffix(".tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"fired_at": firing["tripped_at"], "rule": firing["rule"]}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._state_path)
        except OSError as exc:
            log.warning("guard state not saved: %s", exc)


def last_fired_at(state_path: Path | None) -> float | None:
    if state_path is None:
        return None
    try:
        value = json.loads(state_path.read_text(encoding="utf-8")).get("fired_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


class Guard:
    """Feed it with ``observe_sample`` (sampler thread) and ``observe_line`` (line sources)."""

    def __init__(
        self,
        config: GuardConfig,
        *,
        on_event: OnEvent,
        runner: ActionRunner | None,
        state_path: Path | None = None,
        phases: PhaseTracker | None = None,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.phases = phases or PhaseTracker()
        self._on_event = on_event
        self._runner = runner
        self._wall, self._mono = wall, mono
        self.armed_at = wall()
        self._lock = threading.Lock()
        self._sample_rules = [r for r in config.rules if r.kind != "kernel_event"]
        self._kernel_rules = [r for r in config.rules if r.kind == "kernel_event"]
        self._streaks: dict[int, float] = {}  # rule index → when its condition became true
        self._windows: dict[int, deque[tuple[float, float]]] = {}  # growth rules: (t, value)
        self._cool_until = float("-inf")
        self.suppressed = 0  # trips inside a cooldown
        fired = last_fired_at(state_path)
        if fired is not None and not config.dry_run:
            left = config.cooldown_s - (self.armed_at - fired)
            if left > 0:
                self._cool_until = mono() + min(left, config.cooldown_s)

    def _in_phase(self, rule: Rule) -> bool:
        wanted = rule.phases if rule.phases is not None else self.config.phases
        return wanted is None or self.phases.phase in wanted

    def observe_sample(self, sample: dict[str, Any]) -> None:
        self.phases.observe_sample(sample)
        now = self._mono()
        for i, rule in enumerate(self._sample_rules):
            values = self._check(i, rule, sample, now)
            if values is not None:
                self._fire(rule, values, now)

    def _check(
        self, i: int, rule: Rule, sample: dict[str, Any], now: float
    ) -> dict[str, Any] | None:
        """The values that tripped ``rule`` on this sample, or None."""
        if rule.kind == "swap_used_growth_above":
            used = swap_used(sample)
            window = self._windows.setdefault(i, deque())
            if used is None:
                return None
            window.append((now, used))
            while now - window[0][0] > rule.hold_s + JITTER_S:
                window.popleft()
            low_t, low = min(reversed(window), key=lambda p: p[1])  # the latest low
            if not self._in_phase(rule) or used - low <= rule.threshold:
                return None
            window.clear()
            return {"swap_used": used, "growth": used - low, "over_s": round(now - low_t, 3)}
        if rule.kind == "mem_available_below":
            name, value = "mem_available", _mem(sample, "MemAvailable")
            true = value is not None and value < rule.threshold
        else:
            assert rule.psi is not None
            name, value = f"psi_{rule.psi[0]}_{rule.psi[1]}_{rule.psi[2]}", psi_value(sample, rule)
            true = value is not None and value > rule.threshold
        if not true or not self._in_phase(rule):
            self._streaks.pop(i, None)
            return None
        since = self._streaks.setdefault(i, now)
        if now - since < rule.hold_s - JITTER_S:
            return None
        del self._streaks[i]
        return {name: value, "threshold": rule.threshold, "held_s": round(now - since, 3)}

    def observe_line(self, line: dict[str, Any]) -> None:
        self.phases.observe_line(line)
        if not self._kernel_rules or (line.get("ts") or 0.0) < self.armed_at:
            return
        found = match_record(line)
        if found is None:
            return
        for rule in self._kernel_rules:
            if self._in_phase(rule) and any(
                matches(m.kind, m.qualifier, found) for m in rule.kernel
            ):
                values = {
                    "kind": found.kind,
                    "detail": found.xid if found.kind == "xid" else found.nv_err or found.code,
                    "text": (line.get("text") or "")[:500],
                    "source": line.get("source"),
                    "kseq": line.get("kseq"),
                    "line_ts": line.get("ts"),
                }
                self._fire(rule, values, self._mono())
                return

    def _fire(self, rule: Rule, values: dict[str, Any], now: float) -> None:
        with self._lock:
            if now < self._cool_until:
                self.suppressed += 1
                return
            self._cool_until = now + self.config.cooldown_s
        firing = {
            "fire_id": os.urandom(6).hex(),
            "rule": rule.text,
            "values": values,
            "phase": self.phases.phase,
            "dry_run": self.config.dry_run,
            "actions": [a.describe() for a in self.config.actions],
            "tripped_at": round(self._wall(), 6),
        }
        if self._runner is not None and not self.config.dry_run:
            self._runner.submit(firing, self.config)  # first: the stop request leaves now
        log.warning("guard %s (%s): %s %s", "matched" if self.config.dry_run else "FIRED",
                    firing["fire_id"], rule.text, values)  # fmt: skip
        self._on_event("guard_fired", firing)
