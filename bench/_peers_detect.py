"""Heartbeat loss → webhook, freezewatch next to Prometheus+Alertmanager: ``n`` real agents
(or ``n`` scrape targets) stopped with SIGSTOP one after another, spread over one heartbeat
(or scrape) interval so each lands at a different point of the cycle; seconds from each
SIGSTOP to the first alert naming it at a loopback receiver."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from bench import _peers_fw as fw
from bench import _peers_prom as prom
from bench._common import ADMIN
from bench._peers_procs import run_dir
from tests.support.http_receiver import serve_posts

FW_INTERVAL_S = 1.0
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # signed, as a real target would be


@contextmanager
def arrivals(match: Callable[[bytes], list[str]]) -> Iterator[tuple[str, dict[str, float]]]:
    """A loopback webhook receiver; yields its URL and {name: first arrival (time.time())}
    for the names ``match`` finds in each body."""
    seen: dict[str, float] = {}
    lock = threading.Lock()

    def handle(_path: str, _headers: dict[str, str], raw: bytes) -> int:
        now = time.time()
        with lock:
            for name in match(raw):
                seen.setdefault(name, now)
        return 200

    with serve_posts(handle) as port:
        yield f"http://127.0.0.1:{port}/hook", seen


def _freeze_all(
    pids: dict[str, int], spread_s: float, seen: dict[str, float], timeout_s: float
) -> list[float]:
    frozen: dict[str, float] = {}
    start = time.time()
    for i, (name, pid) in enumerate(pids.items()):
        time.sleep(max(0.0, start + spread_s * i / len(pids) - time.time()))
        os.kill(pid, signal.SIGSTOP)
        frozen[name] = time.time()
    deadline = time.monotonic() + timeout_s
    while not all(name in seen for name in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [seen[name] - frozen[name] for name in pids if name in seen]


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not reached within {timeout_s} s")
        time.sleep(0.2)


def freezewatch(n: int) -> list[float]:
    """A collector at its defaults (3 s grace; hosts with no probe configured) on SQLite."""
    names = tuple(f"bench-detect-{i}" for i in range(n))

    def match(raw: bytes) -> list[str]:
        body = json.loads(raw)
        if body.get("event") != "incident.opened":
            return []
        return [name for name in names if f'"{name}"' in raw.decode()]

    with (
        run_dir("detect") as (tmp, ps),
        arrivals(match) as (hook, seen),
    ):
        env = {"FREEZEWATCH_WEBHOOK_URLS": f"{hook}|json|{SECRET}"}
        side, tokens = fw.start(ps, tmp, backend="sqlite", pg=None, kmsg=None, hosts=names, env=env)
        kmsg = tmp / "kmsg"
        kmsg.touch()
        pids = {
            name: fw.start_real_agent(ps, tmp, side.url, tokens[name], name, kmsg) for name in names
        }

        def all_up() -> bool:
            headers = {"Authorization": f"Bearer {ADMIN}"}
            try:
                hosts = httpx.get(f"{side.url}/api/v1/hosts", headers=headers, timeout=10).json()
            except httpx.HTTPError:  # a collector slow to answer on a loaded machine: ask again
                return False
            return sum(1 for h in hosts if h["name"] in names and h["status"] == "up") == n

        _wait(all_up, 60, "every agent heard from")
        time.sleep(2 * FW_INTERVAL_S)
        side.sink.close()
        return _freeze_all(pids, FW_INTERVAL_S, seen, timeout_s=60)


def prometheus(variant: prom.Variant, n: int) -> list[float]:
    """``n`` targets scraped under ``variant``; each frozen once all are up."""
    with run_dir("am") as (tmp, ps):
        targets = dict(prom.start_target(ps, f"target-{i}")[::-1] for i in range(n))

        def match(raw: bytes) -> list[str]:
            alerts = json.loads(raw).get("alerts", [])
            return [a["labels"].get("instance", "") for a in alerts if a.get("status") == "firing"]

        with arrivals(match) as (hook, seen):
            stack = prom.start(ps, tmp, variant, list(targets), hook)
            _wait(lambda: stack.up_count() == n, 3 * variant.scrape_s + 30, "every target scraped")
            return _freeze_all(targets, variant.scrape_s, seen, timeout_s=6 * variant.scrape_s + 60)
