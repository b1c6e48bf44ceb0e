"""Probing a silent host from the collector: TCP to its SSH port, an SSH command, vLLM /health.

All probes run in parallel under one overall deadline; a probe that has not answered by then
counts as failed ("no answer within deadline"). Each result keeps its timing.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import httpx

from collector.models import Host, IncidentKind
from collector.remote.commands import RunResult
from collector.remote.connect import SSHTarget
from collector.remote.ssh import SSHClient
from collector.remote.targets import ssh_target

log = logging.getLogger(__name__)

BOOT_ID_ARGV = ("cat", "/proc/sys/kernel/random/boot_id")
RESTART_AGENT_ARGV = ("systemctl", "restart", "freezewatch-agent")
PROBE_OUTPUT = 64 * 1024


@dataclass(frozen=True)
class ProbeTarget:
    """What the probes need from a Host row, copied so probes run outside any session."""

    name: str
    ssh_host: str | None
    ssh_port: int
    ssh: SSHTarget | None
    vllm_url: str | None

    @classmethod
    def of(cls, host: Host) -> ProbeTarget:
        return cls(
            name=host.name,
            ssh_host=host.ssh_host,
            ssh_port=host.ssh_port,
            ssh=ssh_target(host),
            vllm_url=host.vllm_url,
        )


def probe_tcp(host: str, port: int, timeout: float) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=timeout):
        return {"detail": f"connected to {host}:{port}"}


def _run(client: SSHClient, ssh: SSHTarget, argv: Sequence[str], timeout: float) -> RunResult:
    return client.run(ssh, argv, timeout=timeout, connect_timeout=timeout, max_output=PROBE_OUTPUT)


def probe_ssh(ssh: SSHTarget, timeout: float, client: SSHClient) -> dict[str, Any]:
    result = _run(client, ssh, BOOT_ID_ARGV, timeout)
    if result.timed_out or result.exit_status != 0:
        raise RuntimeError(
            f"boot_id command failed (exit {result.exit_status}, timed out {result.timed_out}): "
            f"{result.stderr.decode(errors='replace')[:200]}"
        )
    boot_id = result.stdout.decode(errors="replace").strip()
    return {"detail": f"boot_id {boot_id}", "boot_id": boot_id}


def probe_vllm(url: str, timeout: float) -> dict[str, Any]:
    health = url.rstrip("/") + "/health"
    response = httpx.get(health, timeout=timeout)
    if response.status_code != 200:
        raise RuntimeError(f"GET {health}: HTTP {response.status_code}")
    return {"detail": f"GET {health}: 200"}


def run_probes(target: ProbeTarget, *, deadline_s: float, ssh: SSHClient) -> list[dict[str, Any]]:
    """Every configured probe, in parallel, within ``deadline_s``; one result dict per probe."""
    probes: dict[str, Callable[[], dict[str, Any]]] = {}
    if target.ssh_host:
        probes["tcp"] = lambda: probe_tcp(target.ssh_host or "", target.ssh_port, deadline_s)
    if (login := target.ssh) is not None:
        probes["ssh"] = lambda: probe_ssh(login, deadline_s, ssh)
    if target.vllm_url:
        probes["vllm"] = lambda: probe_vllm(target.vllm_url or "", deadline_s)
    if not probes:
        return []

    def timed(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        started = time.monotonic()
        try:
            out = {"name": name, "ok": True, **fn()}
        except Exception as exc:
            out = {"name": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}
        out["duration_s"] = round(time.monotonic() - started, 4)
        return out

    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="probe")
    futures = {name: pool.submit(timed, name, fn) for name, fn in probes.items()}
    wait(futures.values(), timeout=deadline_s)
    # Late probes keep running on their own timeouts; nobody waits for them.
    pool.shutdown(wait=False, cancel_futures=True)
    results = []
    for name, future in futures.items():
        if future.done():
            results.append(future.result())
        else:
            results.append(
                {
                    "name": name,
                    "ok": False,
                    "detail": "no answer within deadline",
                    "duration_s": round(time.monotonic() - started, 4),
                }
            )
    for r in results:
        log.info(
            "probe %s %s: ok=%s %s (%.3f s)",
            target.name,
            r["name"],
            r["ok"],
            r["detail"],
            r["duration_s"],
        )
    return results


def classify(probes: list[dict[str, Any]]) -> IncidentKind:
    """SSH or vLLM answering means the host runs and only the agent is silent.

    A bare TCP handshake is not enough: the kernel completes it even when userspace is frozen.
    """
    alive = any(p["ok"] for p in probes if p["name"] in ("ssh", "vllm"))
    return IncidentKind.AGENT_DOWN if alive else IncidentKind.UNREACHABLE


def restart_agent(login: SSHTarget, *, timeout: float, ssh: SSHClient) -> dict[str, Any]:
    """``systemctl restart freezewatch-agent`` over SSH; the outcome as a recordable dict."""
    started = time.monotonic()
    try:
        result = _run(ssh, login, RESTART_AGENT_ARGV, timeout)
    except Exception as exc:
        return {
            "argv": list(RESTART_AGENT_ARGV),
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "duration_s": round(time.monotonic() - started, 4),
        }
    return {
        "argv": list(RESTART_AGENT_ARGV),
        "ok": result.exit_status == 0 and not result.timed_out,
        "exit_status": result.exit_status,
        "stderr": result.stderr.decode(errors="replace")[-2000:],
        "duration_s": round(result.duration_s, 4),
    }
