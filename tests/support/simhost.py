"""A simulated DGX Spark for demos and tests: a real agent watching a fake, moving host.

    python -m tests.support.simhost --collector URL --token TOKEN --host-name NAME --data-dir DIR
        [--freeze-every 180] [--first-freeze 45] [--freeze-seconds 20] [--load-seconds 20]
        [--vllm-port P] [--interval 1.0]

Under DIR: ``proc/`` (meminfo, pressure, vmstat, loadavg, boot_id rewritten every interval with
values that follow a vLLM cold start: MemAvailable collapsing at the drafter load, PSI rising and
recovering), ``kmsg`` (this boot's kernel records), ``vllm.log``, the agent's ``state/``, a
stand-in ``journalctl`` serving previous boots' kernel records, and each child's output.

Each boot starts the agent, then the vLLM stand-in cold with NemoClaw's MTP recipe (its drafter
load appends NV_ERR_NO_MEMORY to ``kmsg``), and two sessions of chat requests. After
``--first-freeze`` seconds (later boots: ``--freeze-every``) the host squeezes memory, logs a soft
lockup and freezes (agent and stand-in SIGSTOPped, proc tree no longer updated); after
``--freeze-seconds`` it "reboots": everything is killed, a new boot id and kmsg appear, and all
restarts cold. Children share one process group per boot and die with this process (PDEATHSIG).
Production code never imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MEM_TOTAL_KB = 127_606_688  # GB10: 121.7 GiB of unified memory
SWAP_TOTAL_KB = 16_777_212
GB = 1_000_000  # kB
MODEL = "nvidia/Qwen3.6-35B-A3B-NVFP4"
SPEC_CONFIG = {"method": "mtp", "num_speculative_tokens": 3, "moe_backend": "triton"}
# NemoClaw's Spark Qwen recipe with MTP (NemoClaw #7127), as the stand-in accepts it.
VLLM_ARGS = (
    "--model", MODEL, "--served-model-name", MODEL, "--max-model-len", "262144",
    "--gpu-memory-utilization", "0.7", "--dtype", "auto", "--quantization", "modelopt",
    "--kv-cache-dtype", "fp8", "--attention-backend", "flashinfer", "--moe-backend", "marlin",
    "--max-num-seqs", "4", "--max-num-batched-tokens", "8192", "--enable-chunked-prefill",
    "--async-scheduling", "--enable-prefix-caching", "--enable-auto-tool-choice",
    "--tool-call-parser", "qwen3_coder", "--reasoning-parser", "qwen3",
    "--speculative-config", json.dumps(SPEC_CONFIG), "--load-format", "fastsafetensors",
)  # fmt: skip
BOOT_RECORDS = (
    (6, "Booting Linux on physical CPU 0x0000000000 [0x411fd872]"),
    (5, "Linux version 6.11.0-1016-nvidia (buildd@bos03-arm64-047) (aarch64-linux-gnu-gcc-13 "
        "(Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0) #16-Ubuntu SMP PREEMPT_DYNAMIC"),
    (6, "Machine model: NVIDIA DGX Spark"),
    (6, "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.126.20  Release Build  "
        "(dvs-builder@U22-I3-AE18-23-3)  Wed Jan  7 22:35:29 UTC 2026"),
)  # fmt: skip
LOCKUP = "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [VLLM::EngineCor:{pid}]"
RCU_STALL = "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"
# MemAvailable (GB) over a cold start, keyed by the fraction of --load-seconds since vLLM began:
# weights stream in, the drafter load collapses memory (the NV_ERR moment), KV cache settles.
LOAD_CURVE = (
    (0.0, 118.0), (0.4, 95.0), (0.45, 30.0), (0.52, 4.8), (0.6, 14.0), (0.75, 38.0),
    (0.9, 31.0), (1.0, 30.0),
)  # fmt: skip
SQUEEZE_S = 15.0  # memory squeeze before a freeze
LOCKUP_LEAD_S = 3.0  # the soft-lockup line comes this long before the freeze


@dataclass(frozen=True)
class SimConfig:
    collector: str
    token: str
    host_name: str
    data_dir: Path
    freeze_every: float = 180.0  # uptime of later boots before they freeze; 0: never
    first_freeze: float = 45.0  # uptime of the first boot before it freezes
    freeze_seconds: float = 20.0
    load_seconds: float = 20.0
    vllm_port: int = 0  # 0: a free port, kept across reboots
    interval: float = 1.0
    python: str = sys.executable


def interpolate(curve: Sequence[tuple[float, float]], x: float) -> float:
    """Piecewise-linear ``curve`` at ``x``, flat outside its range."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return curve[-1][1]


class HostModel:
    """The fake host's memory, PSI, vmstat and load, advanced once per tick of ``dt`` seconds."""

    def __init__(self, load_seconds: float, rng: random.Random | None = None) -> None:
        self.load_seconds = load_seconds
        self.rng = rng or random.Random()
        self.psi = {r: {"some": [0.0, 0.0, 0.0, 0], "full": [0.0, 0.0, 0.0, 0]} for r in PSI}
        self.vmstat = {
            "pgmajfault": 18_230, "pswpin": 0, "pswpout": 0, "oom_kill": 0,
            "allocstall_normal": 0, "allocstall_movable": 0, "compact_stall": 0,
            "pgpgin": 981_233, "pgpgout": 214_332,
        }  # fmt: skip
        self.swap_used_kb = 0.0
        self.load = [0.3, 0.2, 0.1]

    def available_gb(self, since_vllm: float | None, to_freeze: float | None, t: float) -> float:
        if since_vllm is None:
            avail = 118.0
        else:
            avail = interpolate(LOAD_CURVE, since_vllm / self.load_seconds)
            if since_vllm > self.load_seconds:  # serving: requests come and go
                avail += 1.5 * math.sin(t / 23.0) + 0.8 * math.sin(t / 7.0)
        if to_freeze is not None and to_freeze < SQUEEZE_S:  # the run-up to the freeze
            squeeze = 1.0 - max(to_freeze, 0.0) / SQUEEZE_S
            avail = avail + (1.2 - avail) * squeeze
        return max(0.6, avail + self.rng.uniform(-0.15, 0.15))

    def tick(
        self, dt: float, since_vllm: float | None, to_freeze: float | None, t: float
    ) -> dict[str, str]:
        """Advance by ``dt`` seconds; returns the proc files (relative path → text)."""
        avail = self.available_gb(since_vllm, to_freeze, t)
        loading = since_vllm is not None and since_vllm < self.load_seconds
        mem_some = min(0.95, max(0.0, (10.0 - avail) / 10.0) * 0.9)
        stalls = {
            "memory": (mem_some, mem_some * 0.8),
            "cpu": (0.18 if loading else 0.04 + 0.3 * mem_some, 0.0),
            "io": (0.25 if loading else 0.02 + 0.4 * mem_some, 0.2 if loading else 0.3 * mem_some),
        }
        for resource, (some, full) in stalls.items():
            for kind, value in (("some", some), ("full", full)):
                row = self.psi[resource][kind]
                for i, window in enumerate((10.0, 60.0, 300.0)):
                    decay = math.exp(-dt / window)
                    row[i] = row[i] * decay + 100.0 * value * (1 - decay)
                row[3] += int(value * dt * 1e6)
        swap_target = SWAP_TOTAL_KB * 0.6 * mem_some
        swap_step = max(-200_000.0, min(400_000.0, swap_target - self.swap_used_kb)) * dt
        self.swap_used_kb = max(0.0, self.swap_used_kb + swap_step)
        rates = {
            "pgmajfault": 40 + 4000 * mem_some,
            "pswpin": 3000 * mem_some**2,
            "pswpout": max(0.0, swap_step) / 4,
            "allocstall_normal": 200 * mem_some**2,
            "compact_stall": 50 * mem_some,
            "pgpgin": 900_000 if loading else 300,
            "pgpgout": 2000,
        }
        for key, rate in rates.items():
            self.vmstat[key] += int(rate * dt)
        running = 2.0 + 6.0 * mem_some + (4.0 if loading else 0.0)
        for i, window in enumerate((60.0, 300.0, 900.0)):
            decay = math.exp(-dt / window)
            self.load[i] = self.load[i] * decay + running * (1 - decay)
        return self.files(avail)

    def files(self, avail_gb: float) -> dict[str, str]:
        avail = int(avail_gb * GB)
        cached = min(avail // 2, 9 * GB)
        free = max(150_000, avail - cached - 300_000)
        meminfo = {
            "MemTotal": MEM_TOTAL_KB, "MemFree": free, "MemAvailable": avail,
            "Buffers": 11_232, "Cached": cached, "SwapCached": int(self.swap_used_kb // 50),
            "Active": MEM_TOTAL_KB - avail - 2 * GB, "Inactive": 2 * GB,
            "SwapTotal": SWAP_TOTAL_KB, "SwapFree": SWAP_TOTAL_KB - int(self.swap_used_kb),
            "Dirty": 1424, "Writeback": 0, "AnonPages": MEM_TOTAL_KB - avail - 3 * GB,
            "Shmem": 330_644, "Slab": 1_204_860, "PageTables": 252_044,
        }  # fmt: skip
        out = {"meminfo": "".join(f"{k + ':':<16}{v:>10} kB\n" for k, v in meminfo.items())}
        for resource, kinds in self.psi.items():
            out[f"pressure/{resource}"] = "".join(
                f"{kind} avg10={r[0]:.2f} avg60={r[1]:.2f} avg300={r[2]:.2f} total={r[3]}\n"
                for kind, r in kinds.items()
            )
        out["vmstat"] = "".join(f"{k} {v}\n" for k, v in self.vmstat.items())
        running = max(1, round(self.load[0]))
        out["loadavg"] = (
            f"{self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f} {running}/1874 402113\n"
        )
        return out


PSI = ("memory", "cpu", "io")


def write_atomic(path: Path, text: str) -> None:
    """Temp + rename: the agent never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def kmsg_record(level: int, seq: int, text: str, usec: int | None = None) -> str:
    """One /dev/kmsg-format record; usec on this machine's monotonic clock, as the agent maps it."""
    usec = int(time.monotonic() * 1e6) if usec is None else usec
    return f"{level},{seq},{usec},-;{text}\n"


def append_kmsg(path: Path, level: int, text: str) -> None:
    """Append a record with the next seq of ``path`` (the stand-in appends the same way)."""
    seq = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            head = line.split(";", 1)[0].split(",")
            if len(head) >= 3 and head[1].isdigit():
                seq = max(seq, int(head[1]) + 1)
    with open(path, "a", encoding="utf-8") as f:
        f.write(kmsg_record(level, seq, text))


def journal_entries(kmsg: Path, boot_id: str) -> list[dict[str, Any]]:
    """``journalctl -k -o json`` objects for the records of ``kmsg`` (journald kept them all)."""
    offset = time.time() - time.monotonic()
    entries = []
    for line in kmsg.read_text(encoding="utf-8", errors="replace").splitlines():
        head, _, text = line.partition(";")
        parts = head.split(",")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        usec = int(parts[2])
        entries.append(
            {
                "_BOOT_ID": boot_id.replace("-", ""),
                "__MONOTONIC_TIMESTAMP": str(usec + 500),
                "__REALTIME_TIMESTAMP": str(int(offset * 1e6) + usec + 500),
                "_SOURCE_MONOTONIC_TIMESTAMP": str(usec),
                "PRIORITY": str(int(parts[0]) & 7),
                "SYSLOG_FACILITY": str(int(parts[0]) >> 3),
                "_TRANSPORT": "kernel",
                "MESSAGE": text,
            }
        )
    return entries


JOURNALCTL = """#!{python}
# journalctl stand-in of a simulated host: prints the kept kernel records of `-b BOOT`.
import sys
args = sys.argv[1:]
boot = args[args.index("-b") + 1] if "-b" in args else ""
try:
    sys.stdout.write(open({journal!r} + "/" + boot + ".jsonl").read())
except OSError:
    sys.stderr.write("Data from the specified boot (" + boot + ") is not available\\n")
    sys.exit(1)
"""


def _pdeathsig() -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when this process dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return lambda: None
    return lambda: libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class SimHost:
    """Boots, runs, freezes and reboots the simulated host until ``stop`` is set."""

    def __init__(self, config: SimConfig, stop: threading.Event | None = None) -> None:
        self.cfg = config
        self.stop = stop or threading.Event()
        self.dir = config.data_dir.resolve()
        self.proc_root = self.dir / "proc"
        self.kmsg = self.dir / "kmsg"
        self.journal = self.dir / "journal"
        self.vllm_log = self.dir / "vllm.log"
        self.vllm_port = config.vllm_port or _free_port()
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pgid = 0
        self.boot_id = ""
        self.boot_no = 0
        self.frozen = False
        self.vllm_started: float | None = None  # monotonic
        self.freeze_at: float | None = None  # monotonic
        self.model = HostModel(config.load_seconds)
        self._deathsig = _pdeathsig()

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal.mkdir(exist_ok=True)
        (self.dir / "pstore").mkdir(exist_ok=True)  # a freeze without panic leaves pstore empty
        self._write_journalctl()
        writer = threading.Thread(target=self._proc_loop, name="proc", daemon=True)
        sessions = [
            threading.Thread(target=self._session, args=(n,), name=f"session{n}", daemon=True)
            for n in range(2)
        ]
        try:
            while not self.stop.is_set():
                self._boot()
                if not writer.is_alive():
                    writer.start()
                    for thread in sessions:
                        thread.start()
                uptime = self.cfg.first_freeze if self.boot_no == 1 else self.cfg.freeze_every
                if uptime <= 0:
                    self.stop.wait()
                    break
                with self.lock:
                    self.freeze_at = time.monotonic() + uptime
                if self.stop.wait(max(0.0, uptime - LOCKUP_LEAD_S)):
                    break
                append_kmsg(self.kmsg, 0, LOCKUP.format(pid=self._vllm_pid()))
                if self.stop.wait(min(LOCKUP_LEAD_S, uptime)):
                    break
                self._freeze()
                if self.stop.wait(self.cfg.freeze_seconds):
                    break
                self._crash()
        finally:
            self._shutdown()
        return 0

    def _boot(self) -> None:
        """A fresh boot: new boot id, a new kernel ring buffer, then the agent and vLLM cold."""
        self.boot_no += 1
        boot_id = str(uuid.uuid4())
        with self.lock:
            self.boot_id, self.frozen, self.vllm_started, self.freeze_at = (
                boot_id,
                False,
                None,
                None,
            )
        write_atomic(self.proc_root / "sys/kernel/random/boot_id", boot_id + "\n")
        self._write_proc(self.model.tick(self.cfg.interval, None, None, time.monotonic()))
        start = int(time.monotonic() * 1e6)
        self.kmsg.write_text(
            "".join(
                kmsg_record(lvl, n, text, start + n * 3000)
                for n, (lvl, text) in enumerate(BOOT_RECORDS)
            )
        )
        self.vllm_log.unlink(missing_ok=True)  # a new container, a new log
        print(f"simhost {self.cfg.host_name}: boot {self.boot_no} ({boot_id})", flush=True)
        agent_log = self.dir / "agent.log"
        offset = agent_log.stat().st_size if agent_log.exists() else 0
        self._spawn("agent", self._agent_argv(), {"FREEZEWATCH_AGENT_TOKEN": self.cfg.token})
        self._wait_agent_ready(agent_log, offset)
        self._spawn("vllm", self._vllm_argv(), {})
        with self.lock:
            self.vllm_started = time.monotonic()

    def _freeze(self) -> None:
        print(f"simhost {self.cfg.host_name}: freeze", flush=True)
        with self.lock:
            self.frozen = True
        self._signal_group(signal.SIGSTOP)
        append_kmsg(self.kmsg, 4, RCU_STALL)  # in journald's buffer; no agent reads it live

    def _crash(self) -> None:
        """Power cycle: everything dies; journald kept this boot's kernel records."""
        print(f"simhost {self.cfg.host_name}: reboot", flush=True)
        self._signal_group(signal.SIGKILL)
        self._reap(timeout=10)
        entries = journal_entries(self.kmsg, self.boot_id)
        write_atomic(
            self.journal / f"{self.boot_id.replace('-', '')}.jsonl",
            "".join(json.dumps(e) + "\n" for e in entries),
        )

    def _shutdown(self) -> None:
        self._signal_group(signal.SIGTERM)
        self._signal_group(signal.SIGCONT)  # a stopped process acts on SIGTERM only once resumed
        if not self._reap(timeout=10):
            self._signal_group(signal.SIGKILL)
            self._reap(timeout=5)

    # -- children ----------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        pgid = self.pgid
        deathsig = self._deathsig

        def preexec() -> None:
            os.setpgid(0, pgid)
            deathsig()

        with open(self.dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=ROOT,  # ``-m agent`` and ``-m tests.support...`` resolve from the repo
                env={**os.environ, **env},
                preexec_fn=preexec,
            )
        with self.lock:
            self.procs.append(proc)
            self.pgid = self.pgid or proc.pid

    def _signal_group(self, sig: signal.Signals) -> None:
        with self.lock:
            pgid, alive = self.pgid, any(p.poll() is None for p in self.procs)
        if pgid and alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)

    def _reap(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        with self.lock:
            self.procs, self.pgid = [], 0
        return True

    def _wait_agent_ready(self, log: Path, offset: int, timeout: float = 20.0) -> None:
        """The agent follows vllm.log from its end: start vLLM only once its sources run."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop.is_set():
            try:
                with open(log, "rb") as f:
                    f.seek(offset)
                    if b"sources:" in f.read():
                        self.stop.wait(0.5)
                        return
            except OSError:
                pass
            self.stop.wait(0.1)

    def _vllm_pid(self) -> int:
        with self.lock:
            return self.procs[-1].pid if self.procs else 0

    def _agent_argv(self) -> list[str]:
        cfg = self.cfg
        return [
            cfg.python, "-m", "agent", "--collector", cfg.collector, "--host-name", cfg.host_name,
            "--interval", str(cfg.interval), "--proc-root", str(self.proc_root),
            "--kmsg", str(self.kmsg), "--state-dir", str(self.dir / "state"),
            "--vllm-url", f"http://127.0.0.1:{self.vllm_port}", "--vllm-log", str(self.vllm_log),
            "--no-gpu", "--container-label", "", "--docker-socket", str(self.dir / "no.sock"),
            "--canary-interval", "0", "--journalctl", str(self.dir / "bin/journalctl"),
            "--pstore-dir", str(self.dir / "pstore"),
        ]  # fmt: skip

    def _vllm_argv(self) -> list[str]:
        return [
            self.cfg.python, "-m", "tests.support.vllm_standin", "--port", str(self.vllm_port),
            *VLLM_ARGS, "--kmsg-file", str(self.kmsg), "--log-file", str(self.vllm_log),
            "--load-seconds", str(self.cfg.load_seconds), "--request-seconds", "1.5",
        ]  # fmt: skip

    def _write_journalctl(self) -> None:
        script = self.dir / "bin/journalctl"
        write_atomic(script, JOURNALCTL.format(python=self.cfg.python, journal=str(self.journal)))
        script.chmod(0o755)

    # -- the world while it runs -------------------------------------------------------------
    def _proc_loop(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(self.cfg.interval):
            now = time.monotonic()
            with self.lock:
                frozen, started, freeze_at = self.frozen, self.vllm_started, self.freeze_at
            if frozen:
                last = now
                continue
            since = None if started is None else now - started
            to_freeze = None if freeze_at is None else freeze_at - now
            self._write_proc(self.model.tick(now - last, since, to_freeze, now))
            last = now

    def _write_proc(self, files: dict[str, str]) -> None:
        for rel, text in files.items():
            write_atomic(self.proc_root / rel, text)

    def _session(self, n: int) -> None:
        """A chat session with tools: keeps vLLM's running/KV figures moving once it serves."""
        url = f"http://127.0.0.1:{self.vllm_port}/v1/chat/completions"
        messages: list[dict[str, str]] = [{"role": "system", "content": "You are a coding agent."}]
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
        ]
        while not self.stop.wait(1.0 + n):
            with self.lock:
                idle = self.frozen or self.vllm_started is None
            if idle:
                continue
            messages = [*messages[-40:], {"role": "user", "content": "Next step, please. " * 20}]
            body = json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode()
            request = urllib.request.Request(
                url, data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as resp:
                    resp.read()
            except (OSError, urllib.error.HTTPError):
                continue  # loading (503), frozen or rebooting


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def parse_args(argv: Sequence[str] | None = None) -> SimConfig:
    p = argparse.ArgumentParser(prog="simhost", description=__doc__.split("\n\n")[0])
    p.add_argument("--collector", required=True, help="collector base URL")
    p.add_argument("--token", required=True, help="the simulated host's agent token")
    p.add_argument("--host-name", required=True)
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--freeze-every", type=float, default=180.0, help="seconds of uptime; 0: never")
    p.add_argument("--first-freeze", type=float, default=None, help="default: min(45, every)")
    p.add_argument("--freeze-seconds", type=float, default=20.0)
    p.add_argument("--load-seconds", type=float, default=20.0, help="vLLM cold-start length")
    p.add_argument("--vllm-port", type=int, default=0, help="0: a free port")
    p.add_argument("--interval", type=float, default=1.0)
    a = p.parse_args(argv)
    first = a.first_freeze if a.first_freeze is not None else min(45.0, a.freeze_every)
    return SimConfig(
        collector=a.collector,
        token=a.token,
        host_name=a.host_name,
        data_dir=a.data_dir,
        freeze_every=a.freeze_every,
        first_freeze=first,
        freeze_seconds=a.freeze_seconds,
        load_seconds=a.load_seconds,
        vllm_port=a.vllm_port,
        interval=a.interval,
    )


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return SimHost(config, stop).run()


if __name__ == "__main__":
    sys.exit(main())
