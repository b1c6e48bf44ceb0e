"""A second "host" for tests: a network namespace joined to the root namespace by a veth pair.

    with NetNamespace() as ns:          # root side 10.231.X.1/30, namespace side 10.231.X.2/30
        proc = ns.run_in_ns(["python3", "-m", "http.server", "--bind", ns.peer_addr, "8000"])
        ns.link_down()                  # the "host" drops off the network
        ns.link_up()

Names embed X (`fwnsX`, `fwhX`, `fwpX`) and X is allocated under a file lock, so concurrent
test processes never collide. Cleanup kills every process left in the namespace and removes
the veth pair and the namespace, also after a failing test.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

SUBNET_PREFIX = "10.231"
LOCK_PATH = Path("/run/freezewatch-netns.lock")


def process_table() -> dict[int, list[str]]:
    """pid → the fields of /proc/PID/stat after the command name (state, ppid, pgrp, sid, ...)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        table[int(entry.name)] = stat.rsplit(")", 1)[1].split()
    return table


def _ip(*args: str, check: bool = True, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


def available() -> bool:
    """True when we are root and can create and delete a network namespace here."""
    if os.geteuid() != 0:
        return False
    probe = f"fwprobe{os.getpid()}"
    try:
        created = _ip("netns", "add", probe, check=False).returncode == 0
        if created:
            _ip("netns", "del", probe, check=False)
        return created
    except (OSError, subprocess.SubprocessError):
        return False


@contextlib.contextmanager
def _allocation_lock() -> Iterator[None]:
    with LOCK_PATH.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _in_use(index: int) -> bool:
    names = {line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()}
    if f"fwns{index}" in names:
        return True
    links = _ip("-o", "link", "show").stdout
    if f" fwh{index}@" in links or f" fwh{index}:" in links:
        return True
    return f" {SUBNET_PREFIX}.{index}." in _ip("-o", "-4", "addr", "show").stdout


class NetNamespace:
    """One namespace + veth pair; attributes name, host_if, peer_if, host_addr, peer_addr."""

    def __init__(self) -> None:
        self.index: int | None = None
        self._procs: list[subprocess.Popen[Any]] = []

    @property
    def name(self) -> str:
        return f"fwns{self._idx}"

    @property
    def host_if(self) -> str:
        return f"fwh{self._idx}"

    @property
    def peer_if(self) -> str:
        return f"fwp{self._idx}"

    @property
    def host_addr(self) -> str:
        """The root namespace's address on the link (the collector's side)."""
        return f"{SUBNET_PREFIX}.{self._idx}.1"

    @property
    def peer_addr(self) -> str:
        """The namespace's address (the test host)."""
        return f"{SUBNET_PREFIX}.{self._idx}.2"

    @property
    def _idx(self) -> int:
        assert self.index is not None, "namespace not created"
        return self.index

    def create(self) -> NetNamespace:
        """Allocate a free X and build namespace, veth pair and addresses."""
        with _allocation_lock():
            start = random.randrange(256)
            for offset in range(256):
                candidate = (start + offset) % 256
                if not _in_use(candidate):
                    self.index = candidate
                    break
            else:
                raise RuntimeError("no free 10.231.X.0/30 subnet for a test namespace")
            try:
                self._build()
            except BaseException:
                self.destroy()
                raise
        return self

    def _build(self) -> None:
        _ip("netns", "add", self.name)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if)
        _ip("link", "set", self.peer_if, "netns", self.name)
        _ip("addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        self.exec_ip("addr", "add", f"{self.peer_addr}/30", "dev", self.peer_if)
        self.exec_ip("link", "set", self.peer_if, "up")
        self.exec_ip("link", "set", "lo", "up")
        # Safety net: if the root-side veth ever goes down, its connected route vanishes and
        # traffic to the namespace's subnet would follow the default route off this machine.
        # This route only applies while the connected route (metric 0) is gone.
        _ip("route", "replace", "blackhole", self._subnet, "metric", "4096")

    @property
    def _subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self._idx}.0/30"

    def exec_ip(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `ip ARGS` inside the namespace."""
        return _ip("-n", self.name, *args)

    def ns_argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` prefixed to run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run_in_ns(self, argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
        """Start `argv` inside the namespace; the process is killed on destroy()."""
        proc = subprocess.Popen(self.ns_argv(argv), **popen_kwargs)
        self._procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside the namespace to completion, capturing text output."""
        return subprocess.run(
            self.ns_argv(argv), capture_output=True, text=True, timeout=timeout, check=False
        )

    def link_down(self) -> None:
        """Take the namespace-side veth down: the namespace is cut off in both directions.

        The root side keeps its route (marked linkdown), so packets to the namespace are
        dropped silently (connects time out, as to a frozen host; no RST/ICMP) instead of
        leaving by the default route; inside, connects fail with "network unreachable"."""
        self.exec_ip("link", "set", self.peer_if, "down")

    def link_up(self) -> None:
        self.exec_ip("link", "set", self.peer_if, "up")

    def pids(self) -> list[int]:
        """Every process currently inside the namespace."""
        if self.index is None:
            return []
        out = _ip("netns", "pids", self.name, check=False).stdout
        return [int(token) for token in out.split()]

    def signal(self, sig: int) -> list[int]:
        """Send ``sig`` to every process inside; one that exited since the listing is skipped
        (a short-lived child, an SSH session ending). Returns the pids listed."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def destroy(self) -> None:
        """Kill all processes in the namespace, remove the veth pair and the namespace."""
        if self.index is None:
            return
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        self.signal(signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._procs.clear()
        # Deleting the root side removes its peer too, wherever the peer lives.
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.name, check=False)
        _ip("route", "del", "blackhole", self._subnet, "metric", "4096", check=False)
        self.index = None

    def __enter__(self) -> NetNamespace:
        return self.create()

    def __exit__(self, *exc_info: object) -> None:
        self.destroy()
