"""The agent's CPU (% of one core) and peak RSS over 60 s at a 1 s interval, every source on.

Real collector (SQLite); the agent follows a kmsg file (a quiet kernel line every 5 s;
``--lines-per-s 10``: ten a second), reads
/proc, polls a vLLM stand-in (/health + /metrics) and follows its log file, watches containers
through the Docker Engine API stand-in, writes canaries into the kmsg file; no GPU here.
Measured from /proc/<pid>/stat (utime+stime) and VmHWM of /proc/<pid>/status, after a warm-up.
``--guard`` arms the guard with a rule of every kind, evaluated on every sample and kernel
line, none of them tripping here (this machine's memory is not that low). The last line is
``{"cpu_percent": .., "rss_mb": .., "guard": "off"|"armed", "lines_per_s": ..}`` (targets:
<= 0.5 % and <= 20 MB at ten lines a second, guard off).

``--vs DIR``: an agent of another checkout runs beside this one over the same minute, on the
same kmsg file, vLLM and Docker stand-ins and collector (as its own host): the JSON line adds
``baseline_cpu_percent`` and ``ratio`` (this ÷ the other). On a shared machine an agent's CPU
moves by a third from one minute to the next; two agents side by side see the same minute.
"""

from __future__ import annotations

import argparse
import json
import os
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


def agent_command(url: str, token: str, host: str, tmp: Path, vllm: tuple[str, Path],
                  docker: DockerStandin, guard: Path | None) -> list[str]:  # fmt: skip
    kmsg, vllm_url, vllm_log = tmp / "kmsg", *vllm
    cmd = [
        sys.executable, "-m", "agent", "--collector", url, "--token", token,
        "--host-name", host, "--interval", "1", "--kmsg", str(kmsg),
        "--state-dir", str(tmp / host / "state"), "--no-gpu", "--vllm-url", vllm_url,
        "--vllm-log", str(vllm_log), "--docker-socket", docker.socket_path,
        "--canary-interval", "10", "--pstore-dir", str(tmp / host / "pstore"),
    ]  # fmt: skip
    return cmd + (["--guard", str(guard)] if guard is not None else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guard", action="store_true", help="arm the guard (rules never trip)")
    parser.add_argument("--lines-per-s", type=float, default=0.2, help="kernel lines a second")
    parser.add_argument("--vs", type=Path, help="another checkout's agent, run beside this one")
    args = parser.parse_args()
    guard, rate = args.guard, args.lines_per_s
    roots = {"this": ROOT} | ({"baseline": args.vs.resolve()} if args.vs else {})
    with tempfile.TemporaryDirectory(prefix="fw-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        db_url = f"sqlite:///{tmp / 'fw.db'}"
        kmsg = tmp / "kmsg"
        kmsg.touch()
        guard_file = None
        if guard:
            guard_file = tmp / "guard.json"
            guard_file.write_text(json.dumps(GUARD_RULES))
        docker = DockerStandin(str(tmp / "docker.sock"))
        vllm, vllm_url, vllm_log = start_vllm(tmp)
        agents: dict[str, subprocess.Popen[bytes]] = {}
        try:
            with running_collector(db_url) as url:
                for name, root in roots.items():
                    host = f"{HOST}-{name}"
                    cmd = agent_command(
                        url, add_host(db_url, host), host, tmp, (vllm_url, vllm_log), docker,
                        guard_file,
                    )  # fmt: skip
                    log = open(tmp / f"agent-{name}.log", "ab")  # noqa: SIM115
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    agents[name] = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=log)
                try:
                    time.sleep(WARMUP_S)
                    cpu0 = {name: cpu_seconds(p.pid) for name, p in agents.items()}
                    t0 = time.monotonic()
                    k = 0
                    while time.monotonic() - t0 < MEASURE_S:
                        with open(kmsg, "ab") as f:
                            f.write(
                                b"6,%d,%d,-;usb 1-1: quiet kernel line %d\n" % (k, 10**7 + k, k)
                            )
                        k += 1
                        time.sleep(max(0.0, t0 + k / rate - time.monotonic()))
                    cpu1 = {name: cpu_seconds(p.pid) for name, p in agents.items()}
                    t1 = time.monotonic()
                    hwm_kb = {name: status_kb(p.pid, "VmHWM") for name, p in agents.items()}
                    rss_kb = status_kb(agents["this"].pid, "VmRSS")
                    for name, p in agents.items():
                        if p.poll() is not None:
                            tail = (tmp / f"agent-{name}.log").read_text()[-2000:]
                            raise RuntimeError(f"agent ({name}) died: {tail}")
                finally:
                    for p in agents.values():
                        p.terminate()
                    for p in agents.values():
                        p.wait(30)
        finally:
            vllm.terminate()
            vllm.wait(30)
            docker.close()
        cpu = {name: (cpu1[name] - cpu0[name]) / (t1 - t0) * 100.0 for name in agents}
        agent_log = (tmp / "agent-this.log").read_text()
    print(agent_log[-1500:])
    state = "armed" if guard else "off"
    print(
        f"agent over {t1 - t0:.0f} s (guard {state}, {rate:g} kernel lines/s): CPU "
        f"{cpu['this']:.2f} % of one core, peak RSS {hwm_kb['this'] / 1024:.1f} MB "
        f"(now {rss_kb / 1024:.1f} MB)"
    )
    figures: dict[str, object] = {
        "cpu_percent": round(cpu["this"], 2),
        "rss_mb": round(hwm_kb["this"] / 1024, 1),
    }
    if "baseline" in cpu:
        ratio = cpu["this"] / cpu["baseline"]
        print(
            f"beside it, {args.vs}'s agent: {cpu['baseline']:.2f} %, peak RSS "
            f"{hwm_kb['baseline'] / 1024:.1f} MB; ratio this ÷ that {ratio:.2f}"
        )
        figures |= {"baseline_cpu_percent": round(cpu["baseline"], 2), "ratio": round(ratio, 3)}
    print(json.dumps({**figures, "guard": state, "lines_per_s": rate}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
