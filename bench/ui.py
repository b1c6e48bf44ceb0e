"""UI chart data speed: 7 days of 1 s samples for one host, then the host page's chart request.

Generates the samples straight into a fresh SQLite database (schema from the real migrations),
starts ``python -m collector serve`` on it, and times the timeline request the host page makes
for the last 24 h and 7 d at the step it would pick for a ~1500 px wide chart, a page of the
log panel's lines request (``/lines``, a kernel line every 6 s) and the hosts page's status
board (``GET /api/v1/hosts``). Prints one line per figure and, last, a JSON object
``{"ttfb_ms_24h", "ttfb_ms_7d", "bytes_7d", "ms_lines", "ttfb_ms_board", ...}``.

Usage: python bench/ui.py [--days 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector import db
from collector.readback.downsample import nice_step, refresh_rollups

ADMIN = "fwa_bench-admin-token-8fxPceYgJfL6GDYk26cIJXv6ZxNu8bsq"
HOST = "spark-bench"
WIDTH_PX = 1500
GIB = 2**30
LINE_EVERY_S = 6
LINES_PAGE = 5000


def generate(db_path: Path, *, days: float, end: float) -> int:
    """Bulk-insert one sample a second for ``days`` ending at ``end``; returns the row count."""
    url = f"sqlite:///{db_path}"
    db.migrate(url)
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute(
        "INSERT INTO hosts (name, token_hash, created_at, simulated, status, status_since,"
        " ssh_port, paused, restart_agent, netconsole_from)"
        " VALUES (?, ?, datetime('now'), 0, 'up', datetime('now'), 22, 0, 0, '[]')",
        (HOST, "0" * 64),
    )
    host_id = conn.execute("SELECT id FROM hosts WHERE name = ?", (HOST,)).fetchone()[0]
    conn.execute(
        "INSERT INTO boots (host_id, boot_id, first_seen_at, last_seen_at)"
        " VALUES (?, 'bench-boot', datetime('now'), datetime('now'))",
        (host_id,),
    )
    boot_pk = conn.execute("SELECT id FROM boots").fetchone()[0]
    n = int(days * 86400)
    start = end - n

    def rows():  # type: ignore[no-untyped-def]
        for i in range(n):
            ts = start + i
            wave = math.sin(i / 3600.0)
            avail = int((60 + 30 * wave) * GIB)
            yield (
                host_id,
                boot_pk,
                i + 1,
                ts,
                ts + 0.05,
                0,
                128 * GIB,
                avail,
                avail // 2,
                int(max(0.0, -wave) * 4 * GIB),
                round(max(0.0, -wave) * 20, 2),
                round(max(0.0, -wave) * 5, 2),
                1.5,
                0.4,
                0.1,
                0.7,
                round(50 + 50 * wave, 1),
                int((40 + 20 * wave) * GIB),
                90.0,
                float(i % 8),
                float(i % 3),
                round(0.5 + 0.4 * wave, 4),
                "{}",
            )

    conn.executemany(
        "INSERT INTO samples (host_id, boot_pk, seq, ts, received_at, burst,"
        " mem_total, mem_available, mem_free, swap_used,"
        " psi_mem_some_avg10, psi_mem_full_avg10, psi_cpu_some_avg10, psi_io_some_avg10,"
        " psi_io_full_avg10, load1, gpu_util, gpu_mem_used, gpu_power_w,"
        " vllm_running, vllm_waiting, vllm_kv_usage, data)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        rows(),
    )
    conn.executemany(
        "INSERT INTO lines (host_id, boot_pk, seq, kseq, ts, received_at, source, priority,"
        " facility, text, truncated, fields, channels, agent_received_at)"
        " VALUES (?,?,?,?,?,?,'kmsg',?,0,?,0,NULL,1,?)",
        (
            (host_id, boot_pk, n + i + 1, i, start + t, start + t + 0.05, 6 if i % 50 else 3,
             f"NVRM: bench line {i}: GPU at PCI:0000:01:00 reports state {i % 17}", start + t)
            for i, t in enumerate(range(0, n, LINE_EVERY_S))
        ),
    )  # fmt: skip
    conn.commit()
    conn.close()
    # What ingest does batch by batch, done once for the bulk-loaded week.
    engine = db.make_engine(url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        refresh_rollups(session, host_id=host_id, since=start, until=end)
    with engine.connect() as conn2:
        conn2.exec_driver_sql("ANALYZE")
    engine.dispose()
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"collector exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("collector did not become ready")


def measure(client: httpx.Client, url: str, params: dict[str, float | int]) -> tuple[float, int]:
    """(ms until the first body byte, body bytes) of one GET, uncompressed."""
    t0 = time.perf_counter()
    with client.stream("GET", url, params=params) as resp:
        resp.raise_for_status()
        chunks = resp.iter_raw()
        first = next(chunks, b"")
        ttfb = (time.perf_counter() - t0) * 1000
        size = len(first) + sum(len(c) for c in chunks)
    return ttfb, size


def measure_all(
    client: httpx.Client, url: str, params: dict[str, float | int | str]
) -> tuple[float, int]:
    """(ms until the whole body arrived, body bytes) of one GET, uncompressed."""
    t0 = time.perf_counter()
    resp = client.get(url, params=params)
    resp.raise_for_status()
    return (time.perf_counter() - t0) * 1000, len(resp.content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--keep", help="directory for the database (kept afterwards)")
    args = parser.parse_args()

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fw-bench-ui-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db_path = workdir / "bench.db"
    db_path.unlink(missing_ok=True)
    end = float(int(time.time()))
    t0 = time.perf_counter()
    n = generate(db_path, days=args.days, end=end)
    print(f"generated {n} samples in {time.perf_counter() - t0:.1f} s")

    port = free_port()
    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": f"sqlite:///{db_path}",
        "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
        "FREEZEWATCH_PORT": str(port),
        "FREEZEWATCH_RUN_SCHEDULER": "false",
    }
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"], cwd=root, env=env
    )
    base = f"http://127.0.0.1:{port}"
    figures: dict[str, float | int] = {}
    try:
        wait_ready(base, proc)
        url = f"{base}/api/v1/hosts/{HOST}/timeline"
        headers = {"Authorization": f"Bearer {ADMIN}", "Accept-Encoding": "identity"}
        with httpx.Client(headers=headers, timeout=60) as client:
            for label, span in (("24h", 86400.0), ("7d", 7 * 86400.0)):
                params = {"since": end - span, "until": end, "step": nice_step(span, WIDTH_PX)}
                measure(client, url, params)  # warm the page cache like a second look would
                runs = [measure(client, url, params) for _ in range(3)]
                ttfb = sorted(r[0] for r in runs)[1]
                size = runs[0][1]
                print(f"{label}: step {params['step']} s, ttfb {ttfb:.0f} ms, {size} bytes")
                figures[f"ttfb_ms_{label}"] = round(ttfb, 1)
                figures[f"bytes_{label}"] = size
                figures[f"step_{label}"] = params["step"]
            # The whole page, not the first byte: each line is built and encoded in full.
            lines = {"since": end - 86400.0, "until": end, "limit": LINES_PAGE, "order": "desc"}
            lines_url = f"{base}/api/v1/hosts/{HOST}/lines"
            measure_all(client, lines_url, lines)
            runs = sorted(measure_all(client, lines_url, lines) for _ in range(5))
            print(f"lines: {LINES_PAGE} of the last 24 h, {runs[2][0]:.0f} ms, {runs[2][1]} bytes")
            figures["ms_lines"] = round(runs[2][0], 1)
            figures["bytes_lines"] = runs[2][1]
            # The hosts page's status board: each host's 1 h/24 h/7 d strips and sparkline.
            measure(client, f"{base}/api/v1/hosts", {})
            runs = [measure(client, f"{base}/api/v1/hosts", {}) for _ in range(3)]
            ttfb = sorted(r[0] for r in runs)[1]
            print(f"hosts board: ttfb {ttfb:.0f} ms, {runs[0][1]} bytes")
            figures["ttfb_ms_board"], figures["bytes_board"] = round(ttfb, 1), runs[0][1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
