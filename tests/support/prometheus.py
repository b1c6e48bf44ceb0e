"""A real Prometheus (Debian's ``prometheus`` package) on a loopback port, for tests.

with TestPrometheus(config) as prom:
    prom.wait_for('freezewatch_host_up{host="spark-01"}')
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.ports import free_port

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


def available() -> tuple[bool, str]:
    if not Path(PROMETHEUS).exists():
        return False, f"{PROMETHEUS} missing; apt install prometheus"
    return True, ""


class TestPrometheus:
    """One Prometheus process over a config dict; ``url`` is its HTTP API."""

    __test__ = False

    def __init__(self, config: dict[str, Any], *, start_timeout_s: float = 60.0) -> None:
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.workdir = Path(tempfile.mkdtemp(prefix="freezewatch-prometheus-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> TestPrometheus:
        config_path = self.workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(self.config))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        tail = self.log_path.read_text(errors="replace")[-2000:]
        self.close()
        raise RuntimeError(f"prometheus did not become ready:\n{tail}")

    def api(self, path: str, **params: str) -> Any:
        r = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def wait_for(self, expr: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` once it is non-empty (scrapes take a few seconds)."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> TestPrometheus:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
