"""``freezewatch-agent``: wire config, sources, shipper and signals together; run until SIGTERM."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent import catchup
from agent.burst import BurstController, is_trigger_line
from agent.canary import Canary
from agent.config import AgentConfig, parse_args
from agent.outbox import Outbox
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources import OnEvent, build_sources
from agent.sources.proc import UNKNOWN_BOOT_ID, read_boot_id
from agent.spool import Spool
from agent.state import AgentState
from agent.threads import pump_line_source, run_canary, run_line_source, setup_netconsole
from agent.transport import Transport

log = logging.getLogger("agent")

# The cyclic GC at Python's default (a collection every 700 new containers) was half the
# agent's CPU at 10 lines/s: every POST allocates dozens of dicts and lists, and a burst
# parked in the outbox is walked again and again. Nearly all of it is freed by reference
# counting; the rare cycle waits for a rarer collection.
GC_THRESHOLDS = (20_000, 20, 20)


def tune_gc() -> None:
    """Freeze what startup allocated (never scanned again) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def system_shutting_down(run_dir: Path = Path("/run/systemd")) -> bool:
    """Is the whole system going down (vs. only the agent being stopped)? Forks only at stop."""
    if (run_dir / "shutdown/scheduled").exists():
        return True
    import subprocess  # here: it is only needed at stop (RSS)

    try:
        out = subprocess.run(
            ["systemctl", "is-system-running"], capture_output=True, text=True, timeout=2
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out == "stopping"


def catch_up(
    config: AgentConfig, plan: catchup.CatchupPlan | None, shipper: Shipper
) -> catchup.CatchupResult | None:
    """Ship the previous boot's journal tail and pstore files (see agent.catchup)."""
    if plan is None:
        catchup.prime_pstore(config.state_dir, config.pstore_dir)
        return None
    result = catchup.run_catchup(
        plan,
        deliver=shipper.deliver,
        agent_info=shipper.agent_info,
        state_dir=config.state_dir,
        journalctl=config.journalctl,
        pstore_dirs=config.pstore_dir,
    )
    log.info("catch-up: %s", result.summary())
    if result.error:
        shipper.event("source_error", source="catchup", error=result.error)
    return result


def run(
    config: AgentConfig,
    stop: threading.Event,
    *,
    outbox: Outbox | None = None,
    shutting_down: Callable[[], bool] = system_shutting_down,
    nvml: Any = None,
    netconsole_setup: Callable[..., Any] | None = None,
) -> int:
    outbox = outbox or Outbox()

    def on_event(kind: str, data: dict[str, Any]) -> None:
        outbox.put_event({"ts": round(time.time(), 6), "kind": kind, "data": data})

    try:
        boot_id = read_boot_id(config.proc_root)
        boot_error = None
    except OSError as exc:
        boot_id, boot_error = UNKNOWN_BOOT_ID, str(exc)
    # before AgentState rewrites state.json for this boot: it knows the previous boot
    plan = None if boot_error else catchup.prepare(config.state_dir, config.host_name, boot_id)
    state = AgentState(config.state_dir, config.host_name, boot_id)
    spool = Spool(config.state_dir / "spool", int(config.spool_max_mb * 1024 * 1024))
    transport = Transport(
        config.collector,
        config.token,
        timeout=config.timeout,
        wait_readable=outbox.wait_readable,
        wait_writable=outbox.wait_writable,
    )
    shipper = Shipper(
        host=config.host_name,
        boot_id=boot_id,
        transport=transport,
        state=state,
        spool=spool,
        outbox=outbox,
        interval=config.interval,
    )
    log.info(
        "agent starting: host=%s boot=%s collector=%s", config.host_name, boot_id, config.collector
    )
    catch_up(config, plan, shipper)
    sources = build_sources(config, on_event, nvml=nvml)
    log.info("sources: %s", ", ".join(sources.names))
    for name, info in sources.infos:
        log.info("%s", info)
        on_event("source_info", {"source": name, "info": info})
    if boot_error:
        shipper.event("source_error", source="boot_id", error=boot_error)
    guard, guard_summary = start_guard(config, on_event)
    burst = BurstController()
    sampler = Sampler(
        sources.samples,
        outbox,
        interval=config.interval,
        burst=burst,
        observer=guard.observe_sample if guard is not None else None,
    )

    def observe(line: dict[str, Any]) -> None:
        if guard is not None:
            try:
                guard.observe_line(line)
            except Exception:  # a guard bug must not stop a line source
                log.exception("guard failed on a line")
        reason = is_trigger_line(line)
        if reason is not None and burst.trigger(reason):
            log.info("burst mode: %s", reason)
            on_event("source_info", {"source": "burst", "info": f"burst mode: {reason}"})
            sampler.kick()

    # Sampling (and so the guard) starts before the first batch: an unreachable collector
    # costs the first batch a timeout, not the guard its first seconds.
    threading.Thread(target=sampler.run, args=(stop,), name="sampler", daemon=True).start()
    shipper.start(guard=guard_summary)
    pumped = [pump_line_source(src, outbox, stop, observe) for src in sources.lines]
    threads = [
        threading.Thread(
            target=run_line_source, args=(src, outbox, stop, observe), name=src.name, daemon=True
        )
        for src, pump in zip(sources.lines, pumped, strict=True)
        if pump is None
    ]
    if config.canary_interval > 0:
        canary = Canary(str(config.kmsg), config.canary_interval, start_n=state.canary_next)
        threads.append(
            threading.Thread(
                target=run_canary, args=(canary, state, on_event, stop), name="canary", daemon=True
            )
        )
    if config.netconsole:
        if netconsole_setup is None:
            from agent.netconsole import setup_target as netconsole_setup
        threads.append(
            threading.Thread(
                target=setup_netconsole,
                args=(config, boot_id, on_event, netconsole_setup),
                name="netconsole",
                daemon=True,
            )
        )
    for thread in threads:
        thread.start()
    tune_gc()
    shipper.run(stop)
    shutdown = shutting_down()
    log.info("agent stopping (system shutdown: %s)", shutdown)
    shipper.finish(shutdown=shutdown)
    for close in pumped:
        if close is not None:
            close()
    return 0


def remove_netconsole(config: AgentConfig) -> int:
    from agent.netconsole import remove_target

    report = remove_target(config.netconsole_name, str(config.sys_root))
    for action in report.actions:
        print(f"netconsole: {action}")
    if not report.ok:
        print(f"netconsole: removal failed: {report.error}", file=sys.stderr)
        return 1
    return 0


def start_guard(config: AgentConfig, on_event: OnEvent) -> tuple[Any, dict[str, Any]]:
    """The guard and what ``agent_started`` says of it; off without rules (its modules are
    loaded only when it is configured: RSS on the GPU host)."""
    if config.guard is None and not config.guard_rule:
        return None, {"state": "off"}
    from agent.guard.setup import build_guard

    return build_guard(config, on_event)


def check_guard(config: AgentConfig) -> int:
    """``--guard-check``: the guard as the agent would run it, or why it would not."""
    from agent.guard.setup import read_guard_config

    try:
        guard_config = read_guard_config(config)
    except ValueError as exc:
        print(f"guard: {exc}", file=sys.stderr)
        return 2
    if guard_config is None:
        print("guard: off (no rules)")
        return 0
    print(json.dumps(guard_config.summary(), indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = parse_args(argv, os.environ)
    if config.netconsole_remove:
        return remove_netconsole(config)
    if config.guard_check:
        return check_guard(config)
    stop = threading.Event()
    outbox = Outbox()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        outbox.wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return run(config, stop, outbox=outbox)
