"""Set up (and remove) a kernel netconsole target through configfs, pointed at the collector.

netconsole sends printk output over UDP from the kernel itself, so it keeps working after
userspace froze. Sequence (netconsole.rst): mkdir the target (created disabled), write
``dev_name``, ``remote_ip``, ``remote_port``, ``remote_mac``, ``extended=1``, msgid and
userdata, then ``enabled=1`` last; attributes only change while ``enabled=0``.

Only messages passing ``console_loglevel`` are sent; raising it affects every console.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.nexthop import find_mac, find_route, udp_poke

CONFIGFS_DIR = "sys/kernel/config"
BROADCAST_MAC = "ff:ff:ff:ff:ff:ff"
DEFAULT_PORT = 6666

Runner = Callable[..., Any]  # subprocess.run-compatible


@dataclass
class SetupReport:
    """What setup_target did, in order, and why it stopped if it did."""

    ok: bool = False
    error_kind: str | None = None  # no_configfs | no_module | busy | no_route | write_failed
    error: str | None = None
    target_dir: str = ""
    dev_name: str | None = None
    remote_ip: str | None = None
    remote_port: int | None = None
    remote_mac: str | None = None
    next_hop: str | None = None
    msgid: bool = False  # the kernel numbers sent messages (msgid gaps = transport loss)
    boot_userdata: bool = False  # packets carry our boot id
    already_enabled: bool = False
    writes: list[tuple[str, str]] = field(default_factory=list)  # (path under target, value)
    actions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def fail(self, kind: str, message: str) -> SetupReport:
        self.ok, self.error_kind, self.error = False, kind, message
        return self

    def summary(self) -> str:
        """Human-readable lines for the CLI."""
        lines = [f"netconsole target {self.target_dir}: {'ok' if self.ok else 'FAILED'}"]
        if self.error:
            lines.append(f"  error ({self.error_kind}): {self.error}")
        lines += [f"  did: {a}" for a in self.actions]
        lines += [f"  wrote {p} = {v}" for p, v in self.writes]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass
class RemoveReport:
    ok: bool = False
    error: str | None = None
    actions: list[str] = field(default_factory=list)


def parse_remote(remote: str) -> tuple[str, int]:
    """``HOST[:PORT]`` -> (host, port); the port defaults to netconsole's 6666."""
    host, sep, port = remote.rpartition(":")
    if not sep:
        return remote, DEFAULT_PORT
    return host, int(port)


def setup_target(
    remote: str,
    *,
    boot_id: str,
    name: str = "freezewatch",
    sys_root: str = "/",
    proc_root: str = "/proc",
    run: Runner = subprocess.run,
    resolve: Callable[[str], str] = socket.gethostbyname,
    poke: Callable[[str, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    replace: bool = False,
) -> SetupReport:
    """Create and enable netconsole target ``name`` sending extended records to ``remote``."""
    poke = poke or udp_poke
    config = os.path.join(sys_root, CONFIGFS_DIR)
    base = os.path.join(config, "netconsole")
    target = os.path.join(base, name)
    report = SetupReport(target_dir=target)
    try:
        host, port = parse_remote(remote)
        ip = str(ipaddress.IPv4Address(resolve(host)))
    except (ValueError, OSError) as exc:
        return report.fail("no_route", f"cannot resolve {remote!r} to an IPv4 address: {exc}")
    report.remote_ip, report.remote_port = ip, port

    problem = _ensure_configfs(config, base, proc_root, run, report)
    if problem:
        return report.fail(*problem)

    route = find_route(ip, proc_root)
    if route is None:
        return report.fail("no_route", f"no IPv4 route to {ip} in {proc_root}/net/route")
    dev, gateway = route
    if dev == "lo":
        return report.fail("no_route", f"{ip} is reached over lo; netconsole needs ethernet")
    next_hop = gateway or ip
    report.dev_name, report.next_hop = dev, next_hop
    mac = find_mac(next_hop, dev, proc_root)
    for _ in range(3):
        if mac:
            break
        report.actions.append(f"sent a UDP datagram to {ip}:{port} to resolve {next_hop}")
        try:
            poke(ip, port)
        except OSError as exc:
            report.warnings.append(f"ARP trigger failed: {exc}")
        sleep(0.2)
        mac = find_mac(next_hop, dev, proc_root)
    if not mac:
        mac = BROADCAST_MAC
        report.warnings.append(
            f"no ARP entry for next hop {next_hop} on {dev}: using broadcast (switches may drop it)"
        )
    report.remote_mac = mac

    wanted = {
        "dev_name": dev,
        "remote_ip": ip,
        "remote_port": str(port),
        "remote_mac": mac,
        "extended": "1",
    }
    if os.path.isdir(target):
        if _read(target, "enabled") == "1":
            current = {k: (_read(target, k) or "").lower() for k in wanted}
            if current == {k: v.lower() for k, v in wanted.items()}:
                report.already_enabled = True
                report.msgid = _msgid_on(target)
                report.boot_userdata = _read(target, "userdata/boot/value") == boot_id
                report.ok = True
                return report
            if not replace:
                differ = sorted(k for k in wanted if current[k] != wanted[k].lower())
                return report.fail(
                    "busy", f"{target} is already enabled with other settings ({', '.join(differ)})"
                )
            if not _write(target, "enabled", "0", report):
                return report
        report.actions.append(f"reusing existing target {target}")
    else:
        try:
            os.mkdir(target)
        except OSError as exc:
            return report.fail("write_failed", f"mkdir {target}: {exc.strerror or exc}")
        report.actions.append(f"created {target}")

    for attr, value in wanted.items():
        if not _write(target, attr, value, report):
            return report
    for attr in ("userdata/msgid_enabled", "msgid_enabled"):  # both layouts exist in kernels
        if os.path.exists(os.path.join(target, attr)):
            if not _write(target, attr, "1", report):
                return report
            report.msgid = True
            break
    else:
        report.warnings.append("kernel has no msgid_enabled (< 6.17): loss detection by seq only")
    userdata = os.path.join(target, "userdata")
    if os.path.isdir(userdata):
        try:
            os.makedirs(os.path.join(userdata, "boot"), exist_ok=True)
        except OSError as exc:
            return report.fail("write_failed", f"mkdir userdata/boot: {exc.strerror or exc}")
        if not _write(target, "userdata/boot/value", boot_id, report):
            return report
        report.boot_userdata = True
    else:
        report.warnings.append("kernel has no netconsole userdata: packets carry no boot id")
    if not _write(target, "enabled", "1", report):
        return report
    report.ok = True
    return report


def remove_target(
    name: str = "freezewatch", sys_root: str = "/", *, rmdir: Callable[[str], None] = os.rmdir
) -> RemoveReport:
    """Disable and remove target ``name`` (userdata entries first, as configfs requires)."""
    target = os.path.join(sys_root, CONFIGFS_DIR, "netconsole", name)
    report = RemoveReport()
    if not os.path.isdir(target):
        report.ok = True
        report.actions.append(f"{target} not present")
        return report
    try:
        if _read(target, "enabled") == "1":
            with open(os.path.join(target, "enabled"), "w") as f:
                f.write("0")
            report.actions.append("wrote enabled = 0")
        userdata = os.path.join(target, "userdata")
        if os.path.isdir(userdata):
            for entry in sorted(os.listdir(userdata)):
                path = os.path.join(userdata, entry)
                if os.path.isdir(path):
                    rmdir(path)
                    report.actions.append(f"removed userdata/{entry}")
        rmdir(target)
        report.actions.append(f"removed {target}")
    except OSError as exc:
        report.error = f"{exc.filename or target}: {exc.strerror or exc}"
        return report
    report.ok = True
    return report


def _ensure_configfs(
    config: str, base: str, proc_root: str, run: Runner, report: SetupReport
) -> tuple[str, str] | None:
    """Mount configfs and load netconsole as needed; returns (kind, message) on failure."""
    if os.path.isdir(base):
        return None
    if not os.path.isdir(config):
        return ("no_configfs", f"{config} does not exist: kernel without configfs")
    if not os.listdir(config) and not _configfs_mounted(proc_root):
        ok, detail = _run(run, ["mount", "-t", "configfs", "configfs", config], report)
        if not ok:
            return ("no_configfs", f"configfs not mounted on {config} and mount failed: {detail}")
    if os.path.isdir(base):
        return None
    ok, detail = _run(run, ["modprobe", "netconsole"], report)
    if not ok:
        return ("no_module", f"modprobe netconsole failed: {detail}")
    if not os.path.isdir(base):
        return (
            "no_module",
            f"netconsole loaded but {base} is missing (kernel without CONFIG_NETCONSOLE_DYNAMIC?)",
        )
    return None


def _run(run: Runner, argv: list[str], report: SetupReport) -> tuple[bool, str]:
    report.actions.append("ran " + " ".join(argv))
    try:
        done = run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        return False, str(exc)
    if done.returncode != 0:
        return False, (done.stderr or "").strip() or f"exit status {done.returncode}"
    return True, ""


def _configfs_mounted(proc_root: str) -> bool:
    try:
        with open(os.path.join(proc_root, "mounts")) as f:
            return any(line.split()[2:3] == ["configfs"] for line in f)
    except OSError:
        return False


def _write(target: str, attr: str, value: str, report: SetupReport) -> bool:
    """One write() per attribute, no newline (configfs stores each write as a whole)."""
    try:
        with open(os.path.join(target, attr), "w") as f:
            f.write(value)
    except OSError as exc:
        report.fail("write_failed", f"writing {value!r} to {attr}: {exc.strerror or exc}")
        return False
    report.writes.append((attr, value))
    return True


def _read(target: str, attr: str) -> str | None:
    try:
        with open(os.path.join(target, attr)) as f:
            return f.read().strip()
    except OSError:
        return None


def _msgid_on(target: str) -> bool:
    return "1" in (_read(target, "userdata/msgid_enabled"), _read(target, "msgid_enabled"))
