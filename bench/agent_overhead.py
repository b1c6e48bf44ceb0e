"""The agent's CPU (% of one core) and peak RSS over 60 s at a 1 s interval, every source on.

Real collector (SQLite); the agent follows a kmsg file (a quiet kernel line every 5 s), reads
/proc, polls a vLLM stand-in (/health + /metrics) and follows its log file, watches containers
through the Docker Engine API stand-in, writes canaries into the kmsg file; no GPU here.
Measured from /proc/<pid>/stat (utime+stime) and VmHWM of /proc/<pid>/status, after a warm-up.
``--guard`` arms the guard with a rule of every kind, evaluated on every sample and kernel
line, none of them tripping here (this machine's memory is not that low). The last line is
``{"cpu_percent": .., "rss_mb": .., "guard": "off"|"armed"}`` (targets: < 2 % and < 35 MB,
the same with the guard armed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    ROOT,
    add_host,
    cpu_seconds,
    free_port,
    running_collector,
    status_kb,
)
from tests.support.docker_standin import DockerStandin

WARMUP_S = 5.0
MEASURE_S = 60.0
HOST = "bench-overhead"
GUARD_RULES = {
    "rules": [
        {"mem_available_below": "64MiB for 2s"},
        {"psi_memory_full_avg10_above": "99.9 for 3s"},
        {"swap_used_growth_above": "512GiB/10s"},
        {"kernel_event": ["nv_err NV_ERR_NO_MEMORY", "xid fatal", "oom_kill"]},
    ],
    "actions": [{"docker_stop": {"timeout": "10s"}}],
}


def start_vllm(tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = tmp / "vllm.log"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.support.vllm_standin", "--port", str(port)),
            *("--load-seconds", "0.5", "--log-file", str(log)),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:  # start the agent after loading: its log phrases would start a burst
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url, log
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("vLLM stand-in did not start")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guard", action="store_true", help="arm the guard (rules never trip)")
    guard = parser.parse_args().guard
    with tempfile.TemporaryDirectory(prefix="fw-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        db_url = f"sqlite:///{tmp / 'fw.db'}"
        token = add_host(db_url, HOST)
        kmsg = tmp / "kmsg"
        kmsg.touch()
        docker = DockerStandin(str(tmp / "docker.sock"))
        vllm, vllm_url, vllm_log = start_vllm(tmp)
        try:
            with running_collector(db_url) as url:
                cmd = [
                    sys.executable, "-m", "agent", "--collector", url, "--token", token,
                    "--host-name", HOST, "--interval", "1", "--kmsg", str(kmsg),
                    "--state-dir", str(tmp / "state"), "--no-gpu", "--vllm-url", vllm_url,
                    "--vllm-log", str(vllm_log), "--docker-socket", docker.socket_path,
                    "--canary-interval", "10", "--pstore-dir", str(tmp / "pstore"),
                ]  # fmt: skip
                if guard:
                    (tmp / "guard.json").write_text(json.dumps(GUARD_RULES))
                    cmd += ["--guard", str(tmp / "guard.json")]
                log = open(tmp / "agent.log", "ab")  # noqa: SIM115
                agent = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)
                try:
                    time.sleep(WARMUP_S)
                    cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
                    k = 0
                    while time.monotonic() - t0 < MEASURE_S:
                        with open(kmsg, "ab") as f:
                            f.write(
                                b"6,%d,%d,-;usb 1-1: quiet kernel line %d\n" % (k, 10**7 + k, k)
                            )
                        k += 1
                        time.sleep(5)
                    cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
                    hwm_kb = status_kb(agent.pid, "VmHWM")
                    rss_kb = status_kb(agent.pid, "VmRSS")
                    if agent.poll() is not None:
                        raise RuntimeError("agent died: " + (tmp / "agent.log").read_text()[-2000:])
                finally:
                    agent.terminate()
                    agent.wait(30)
        finally:
            vllm.terminate()
            vllm.wait(30)
            docker.close()
        cpu_percent = (cpu1 - cpu0) / (t1 - t0) * 100.0
        agent_log = (tmp / "agent.log").read_text()
    print(agent_log[-1500:])
    state = "armed" if guard else "off"
    print(
        f"agent over {t1 - t0:.0f} s (guard {state}): CPU {cpu_percent:.2f} % of one core, "
        f"peak RSS {hwm_kb / 1024:.1f} MB (now {rss_kb / 1024:.1f} MB)"
    )
    figures = {"cpu_percent": round(cpu_percent, 2), "rss_mb": round(hwm_kb / 1024, 1)}
    print(json.dumps({**figures, "guard": state}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
