"""A simulated GPU host for matrix campaigns, reachable over SSH (tests and the demo).

    lab = LabHost(LabConfig(collector=URL, token=T, host_name=N, data_dir=D), ns=None).start()
    lab.reboot_argv        # the SSH command that reboots it: ["touch", ".../ctl/reboot"]
    lab.power_argv(log)    # a power-cycle hook run on the collector host (logs its own argv)
    lab.freeze()           # SIGSTOP every process of the host (and its link down in a netns)
    lab.crash_and_boot()   # a power cycle: everything dies, a new boot id, sshd and agent again
    lab.close()

It is a real sshd and the real agent over a fake /proc (simhost's ``HostModel``) and a kmsg
file; whatever the collector starts over SSH (the vLLM stand-in, workloads) is one of the
host's processes. A reboot request (the touch, seen within 0.2 s) kills every process of the
host without a word (the agent announces nothing: the collector's planned-reboot marker is
what keeps it quiet), keeps the host down ``boot_seconds``, then boots it with a new boot id.
With ``ns`` (a tests.support.netns.NetNamespace) sshd and the agent run inside the namespace.

``tests.support.simlab_demo`` runs the demo's campaign against one. Production code never
imports this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.netns import NetNamespace, process_table
from tests.support.simhost import BOOT_RECORDS, HostModel, kmsg_record, write_atomic
from tests.support.sshd import TestSshd

ROOT = Path(__file__).resolve().parents[2]
POWER_HOOK = (
    "import json, pathlib, sys\n"
    "log, ctl = sys.argv[1], sys.argv[2]\n"
    "with open(log, 'a') as f: f.write(json.dumps(sys.argv) + '\\n')\n"
    "if ctl: pathlib.Path(ctl).touch()\n"
)


@dataclass(frozen=True)
class LabConfig:
    collector: str
    token: str
    host_name: str
    data_dir: Path
    interval: float = 0.5
    boot_seconds: float = 2.5  # down between a reboot and the new boot (more than grace)
    python: str = sys.executable


def descendants(root: int) -> list[int]:
    """Every live process under ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for pid, fields in process_table().items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class LabHost:
    def __init__(self, config: LabConfig, ns: NetNamespace | None = None) -> None:
        self.cfg = config
        self.ns = ns
        self.dir = config.data_dir.resolve()
        self.proc_root = self.dir / "proc"
        self.kmsg = self.dir / "kmsg"
        self.ctl = self.dir / "ctl"
        self.boot_id = ""
        self.boots = 0
        self.frozen = False
        self.down = False
        self.model = HostModel(load_seconds=20.0)
        self.lock = threading.RLock()
        self.stop_event = threading.Event()
        self.agent: subprocess.Popen[bytes] | None = None
        host = ns.peer_addr if ns is not None else "127.0.0.1"
        prefix = ns.ns_argv([]) if ns is not None else []
        self.sshd = TestSshd(host=host, argv_prefix=prefix)
        self._threads = [
            threading.Thread(target=self._proc_loop, name="lab-proc", daemon=True),
            threading.Thread(target=self._ctl_loop, name="lab-ctl", daemon=True),
        ]

    # -- what the collector is told --------------------------------------------------------
    @property
    def reboot_argv(self) -> list[str]:
        return ["touch", str(self.ctl / "reboot")]

    def power_argv(self, log: Path, *, brings_back: bool = True) -> list[str]:
        """A hook for the collector host: appends its argv to ``log``; with ``brings_back``
        it also power-cycles this host."""
        ctl = str(self.ctl / "power") if brings_back else ""
        return [self.cfg.python, "-c", POWER_HOOK, str(log), ctl]

    def ssh_settings(self) -> dict[str, Any]:
        """The body of ``PATCH /api/v1/hosts/{name}`` that lets the collector log in."""
        s = self.sshd
        return {"ssh": f"{s.user}@{s.host}:{s.port}", "ssh_key_path": str(s.key_path),
                "ssh_host_key": s.host_key_line}  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> LabHost:
        """Boot the host (sshd first, unless already started to register its key)."""
        self.ctl.mkdir(parents=True, exist_ok=True)
        for stale in self.ctl.iterdir():
            stale.unlink()
        if self.sshd.process is None:
            self.sshd.start()
        self._boot(start_sshd=False)
        for thread in self._threads:
            thread.start()
        return self

    def close(self) -> None:
        self.stop_event.set()
        with self.lock:
            self._stop_agent()
            self._kill_all()
        self.sshd.close()

    def _stop_agent(self) -> None:
        """Closing the lab is no crash: a running agent gets SIGTERM, as from systemd, and tells
        the collector it stops (the host is `stopped`, not silent); a frozen host stays frozen."""
        agent = self.agent
        if agent is None or self.frozen or self.down or agent.poll() is not None:
            return
        agent.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            agent.wait(10)

    def __enter__(self) -> LabHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def host_pids(self) -> list[int]:
        """Every process of the host: the agent, sshd and all that SSH sessions started."""
        if self.ns is not None:
            return self.ns.pids()
        pids = [p.pid for p in (self.agent, self.sshd.process) if p and p.poll() is None]
        if self.sshd.process is not None:
            pids += descendants(self.sshd.process.pid)
        return pids

    def freeze(self) -> None:
        """A hard freeze: every process stops, nothing more is sampled, the link goes down."""
        with self.lock:
            self.frozen = True
            for pid in self.host_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            if self.ns is not None:
                self.ns.link_down()
        print(f"simlab {self.cfg.host_name}: freeze", flush=True)

    def crash_and_boot(self) -> None:
        """Power cycle: every process dies, down for ``boot_seconds``, a new boot."""
        with self.lock:
            self._kill_all()
            self.down = True
        self.stop_event.wait(self.cfg.boot_seconds)
        if not self.stop_event.is_set():
            self._boot(start_sshd=True)

    def _kill_all(self) -> None:
        for pid in self.host_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in (self.agent, self.sshd.process):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
        if self.ns is not None:
            self.ns.link_up()

    def _boot(self, *, start_sshd: bool) -> None:
        with self.lock:
            self.boots += 1
            self.boot_id = str(uuid.uuid4())
            write_atomic(self.proc_root / "sys/kernel/random/boot_id", self.boot_id + "\n")
            self._write_proc(self.model.tick(self.cfg.interval, None, None, time.monotonic()))
            start = int(time.monotonic() * 1e6)
            self.kmsg.write_text(
                "".join(
                    kmsg_record(level, n, text, start + n * 3000)
                    for n, (level, text) in enumerate(BOOT_RECORDS)
                )
            )
            if start_sshd:
                self.sshd.restart()
            self.agent = self._start_agent()
            self.frozen = self.down = False
        print(f"simlab {self.cfg.host_name}: boot {self.boots} ({self.boot_id})", flush=True)

    def _start_agent(self) -> subprocess.Popen[bytes]:
        cfg = self.cfg
        argv = [
            cfg.python, "-m", "agent", "--collector", cfg.collector, "--host-name", cfg.host_name,
            "--interval", str(cfg.interval), "--timeout", "1", "--proc-root", str(self.proc_root),
            "--kmsg", str(self.kmsg), "--state-dir", str(self.dir / "state"), "--no-gpu",
            "--container-label", "", "--docker-socket", str(self.dir / "no.sock"),
            "--canary-interval", "0", "--journalctl", "false", "--pstore-dir",
            str(self.dir / "pstore"),
        ]  # fmt: skip
        if self.ns is not None:
            argv = self.ns.ns_argv(argv)
        log = open(self.dir / "agent.log", "ab")  # noqa: SIM115 - lives as long as the agent
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZEWATCH_AGENT_TOKEN": cfg.token}
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)

    # -- the world while it runs -----------------------------------------------------------
    def _proc_loop(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(self.cfg.interval):
            now = time.monotonic()
            with self.lock:
                if not (self.frozen or self.down):
                    self._write_proc(self.model.tick(now - last, None, None, now))
            last = now

    def _write_proc(self, files: dict[str, str]) -> None:
        for rel, text in files.items():
            write_atomic(self.proc_root / rel, text)

    def _ctl_loop(self) -> None:
        while not self.stop_event.wait(0.2):
            for name in ("reboot", "power"):
                request = self.ctl / name
                if request.exists():
                    request.unlink()
                    print(f"simlab {self.cfg.host_name}: {name} requested", flush=True)
                    self.crash_and_boot()
