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

from collector.models import Host

log = logging.getLogger(__name__)

BOOT_ID_ARGV = ("cat", "/proc/sys/kernel/random/boot_id")
RESTART_AGENT_ARGV = ("systemctl", "restart", "freezewatch-agent")

# (target, argv, timeout) -> ssh.RunResult; injected by tests, collector.remote.ssh by default.
SSHRunner = Callable[[Any, Sequence[str], float], Any]


@dataclass(frozen=True)
class ProbeTarget:
    """What the probes need from a Host row, copied so probes run outside any session."""

    name: str
    ssh_user: str | None
    ssh_host: str | None
    ssh_port: int
    ssh_key_path: str | None
    ssh_host_key: str | None
    vllm_url: str | None

    @classmethod
    def of(cls, host: Host) -> ProbeTarget:
        return cls(
            name=host.name,
            ssh_user=host.ssh_user,
            ssh_host=host.ssh_host,
            ssh_port=host.ssh_port,
            ssh_key_path=host.ssh_key_path,
            ssh_host_key=host.ssh_host_key,
            vllm_url=host.vllm_url,
        )

    @property
    def can_ssh(self) -> bool:
        return bool(self.ssh_user and self.ssh_host)

    def ssh_target(self) -> Any:
        from collector.remote.ssh import SSHTarget

        return SSHTarget(
            user=self.ssh_user or "",
            host=self.ssh_host or "",
            port=self.ssh_port,
            key_path=self.ssh_key_path,
            known_host_key=self.ssh_host_key,
        )


def default_ssh_runner(target: Any, argv: Sequence[str], timeout: float) -> Any:
    from collector.remote import ssh

    return ssh.run(target, argv, timeout=timeout, connect_timeout=timeout, max_output=64 * 1024)


def probe_tcp(host: str, port: int, timeout: float) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=timeout):
        return {"detail": f"connected to {host}:{port}"}


def probe_ssh(target: ProbeTarget, timeout: float, runner: SSHRunner) -> dict[str, Any]:
    result = runner(target.ssh_target(), BOOT_ID_ARGV, timeout)
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


def run_probes(
    target: ProbeTarget, *, deadline_s: float, ssh_runner: SSHRunner | None = None
) -> list[dict[str, Any]]:
    """Every configured probe, in parallel, within ``deadline_s``; one result dict per probe."""
    runner = ssh_runner or default_ssh_runner
    probes: dict[str, Callable[[], dict[str, Any]]] = {}
    if target.ssh_host:
        probes["tcp"] = lambda: probe_tcp(target.ssh_host or "", target.ssh_port, deadline_s)
    if target.can_ssh:
        probes["ssh"] = lambda: probe_ssh(target, deadline_s, runner)
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


def classify(probes: list[dict[str, Any]]) -> str:
    """SSH or vLLM answering means the host runs and only the agent is silent.

    A bare TCP handshake is not enough: the kernel completes it even when userspace is frozen.
    """
    alive = any(p["ok"] for p in probes if p["name"] in ("ssh", "vllm"))
    return "agent_down" if alive else "unreachable"


def restart_agent(
    target: ProbeTarget, *, timeout: float, ssh_runner: SSHRunner | None = None
) -> dict[str, Any]:
    """``systemctl restart freezewatch-agent`` over SSH; the outcome as a recordable dict."""
    runner = ssh_runner or default_ssh_runner
    started = time.monotonic()
    try:
        result = runner(target.ssh_target(), RESTART_AGENT_ARGV, timeout)
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
