"""A real collector process filled by real HTTP ingest batches, and Debian's chromium.

The collector runs as ``python -m collector serve`` on a free loopback port over a fresh SQLite
database; one host gets ten minutes of 1 s samples and a kernel NVRM Xid line at a known time.
``matrix_run`` runs a real two-profile matrix on that host through the collector's own runner:
SSH to the test sshd, the vLLM stand-in as the server, an agent feed posting samples meanwhile.
``real_incident`` makes a second (simulated) host go silent under the collector's own scheduler
until its checker opens an ``unreachable`` incident, then brings it back on a new boot
(``rebooted``), with a post-mortem over SSH and webhook deliveries to a loopback receiver.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.wire import INGEST_PATH

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN_TOKEN = "fwa_browser-test-admin-token-4MOuXM-Yi5b-kgNPLjjPDU0OL29Vx6n-"
HOST = "spark-01"
BOOT = "0b3c1f52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
SIM_HOST = "spark-sim"
SIM_BOOT_A = "5a1d3b20-4c5d-4d4e-9f8a-1b2c3d4e5f61"
SIM_BOOT_B = "7d2e4a10-5b6c-4d4e-9f8a-1b2c3d4e5f62"
XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
PSTORE_DMESG = (
    "Panic#1 Part1\n<0>[ 812.000001] Kernel panic - not syncing: hung_task: blocked tasks\n"
)
EMPTY_PSTORE = "console-ramoops-0"
GIB = 2**30
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
WIDE, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}  # viewports
NVRM_TEXT = (
    "NVRM: Xid (PCI:000f:01:00): 31, pid=4242, name=python3, channel 0x00000002, "
    "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_3 faulted @ 0x7f12_3456a000."
)


def require(condition: bool, reason: str) -> None:
    """Skip with a reason; under CI=true a missing component is a failure."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class LiveCollector:
    base_url: str
    nvrm_ts: float
    first_ts: float
    last_ts: float
    db_url: str = ""
    token: str = ""
    data_dir: Path | None = None
    sim_token: str = ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    # Generous: on a loaded two-core machine the first import of the app alone can take 30 s.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"collector exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("collector did not become ready")


def sample(seq: int, ts: float) -> dict[str, Any]:
    wave = (seq % 120) / 120
    return {
        "seq": seq,
        "ts": ts,
        "mem": {
            "MemTotal": 128 * GIB,
            "MemAvailable": int((70 - 40 * wave) * GIB),
            "MemFree": int(10 * GIB),
            "SwapTotal": 8 * GIB,
            "SwapFree": int((8 - wave) * GIB),
        },
        "psi": {
            "memory": {"some": {"avg10": 12 * wave}, "full": {"avg10": 4 * wave}},
            "cpu": {"some": {"avg10": 1.5}},
            "io": {"some": {"avg10": 0.8}, "full": {"avg10": 0.2}},
        },
        "load": {"1": 2.0},
        "gpu": {"util": 90 * wave, "mem_used": int(60 * GIB * wave)},
        "vllm": [
            {
                "url": "http://127.0.0.1:8000",
                "health": "ok",
                "running": 4,
                "waiting": seq % 3,
                "kv_usage": 0.3 + 0.5 * wave,
            },
        ],
    }


# A dry-run match of the agent's guard 60 s ago: drawn as a "guard" marker.
GUARD_FIRED = {
    "seq": 1,
    "kind": "guard_fired",
    "data": {"fire_id": "g1", "rule": "psi_memory_full_avg10_above: 20 for 3s", "dry_run": True,
             "values": {"psi_memory_full_avg10": 31.0}, "actions": ["docker_stop"]},
}  # fmt: skip


def _fill(base: str, token: str, now: float) -> LiveCollector:
    """Ten minutes of 1 s samples ending now, kernel chatter and one Xid line 120 s ago."""
    first = float(int(now) - 600)
    nvrm_ts = first + 480.25
    headers = {"Authorization": f"Bearer {token}"}
    agent = {"version": "0.1.0", "pid": 4242, "started_at": first - 5}
    lines = [
        {
            "seq": 1,
            "ts": first + 10.5,
            "source": "kmsg",
            "priority": 6,
            "facility": 0,
            "kseq": 1001,
            "text": "nvidia-uvm: Loaded the UVM driver, major device number 508.",
        },
        {
            "seq": 2,
            "ts": first + 300.0,
            "source": "journal",
            "priority": 4,
            "text": "systemd[1]: vllm.service: Watchdog timeout (limit 3min)!",
        },
        {
            "seq": 3,
            "ts": nvrm_ts,
            "source": "kmsg",
            "priority": 4,
            "facility": 0,
            "kseq": 1002,
            "text": NVRM_TEXT,
        },
    ]
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for start in range(0, 601, 200):
            samples = [sample(i + 1, first + i) for i in range(start, min(start + 200, 601))]
            body = {
                "host": HOST,
                "boot_id": BOOT,
                "agent": agent,
                "samples": samples,
                "lines": lines if start == 0 else [],
                "events": [GUARD_FIRED | {"ts": first + 540.5}] if start == 0 else [],
            }
            resp = client.post(INGEST_PATH, json=body)
            resp.raise_for_status()
    return LiveCollector(base, nvrm_ts, first, first + 600, token=token)


@pytest.fixture(scope="session")
def live_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCollector]:
    workdir = tmp_path_factory.mktemp("browser")
    db_url = f"sqlite:///{workdir / 'fw.db'}"
    pstore = workdir / "pstore"
    pstore.mkdir()
    (pstore / "dmesg-ramoops-0").write_text(PSTORE_DMESG)
    (pstore / EMPTY_PSTORE).write_text("")  # an empty artifact, which the page must explain
    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": db_url,
        "FREEZEWATCH_ADMIN_TOKEN": ADMIN_TOKEN,
        "FREEZEWATCH_DATA_DIR": str(workdir / "data"),
        "FREEZEWATCH_MATRIX_SETTLE_S": "0.5",
        # The scheduler runs (heartbeat checks, alerts, post-mortems); the main host's filled
        # history ends at the fixture's start, so its grace is long: only SIM_HOST goes silent.
        "FREEZEWATCH_RUN_SCHEDULER": "true",
        "FREEZEWATCH_GRACE_S": "86400",
        "FREEZEWATCH_PSTORE_DIR": str(pstore),
        "FREEZEWATCH_WEBHOOK_BACKOFF_BASE_S": "0.3",
        "FREEZEWATCH_WEBHOOK_BACKOFF_MAX_S": "1",
    }

    def add_host(*args: str) -> str:
        added = subprocess.run(
            [sys.executable, "-m", "collector", "add-host", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return added.stdout.strip().splitlines()[-1]

    token = add_host(HOST)
    sim_token = add_host(SIM_HOST, "--simulated")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
        cwd=ROOT,
        env={**env, "FREEZEWATCH_PORT": str(port)},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        filled = _fill(base, token, time.time())
        filled.db_url, filled.data_dir = db_url, workdir / "data"
        filled.sim_token = sim_token
        yield filled
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    require(Path(CHROMIUM).exists(), f"{CHROMIUM} missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield Browser(chromium)
        chromium.close()


# How long a page may take to show what a test waits for. Playwright's 30 s ran out in CI for a
# page's three API reads while other test workers loaded both cores; a wait ends when its
# condition holds, so only a failing test waits this long.
UI_WAIT_MS = 90_000


class Browser:
    """The launched Chromium, whose contexts wait ``UI_WAIT_MS`` by default."""

    def __init__(self, chromium: Any) -> None:
        self._chromium = chromium

    def new_context(self, **options: Any) -> Any:
        context = self._chromium.new_context(**options)
        context.set_default_timeout(UI_WAIT_MS)
        context.route("**/static/**", fetch_outside_chromium)
        return Context(context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chromium, name)


class Context:
    """A browser context whose pages' ``goto`` survives a network change (see
    ``fetch_outside_chromium``): a navigation Chromium failed with ERR_NETWORK_CHANGED is
    made again, up to twice."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def new_page(self) -> Any:
        page = self._context.new_page()
        page.goto = partial(goto_again_after_network_change, page.goto)
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def goto_again_after_network_change(goto: Callable[..., Any], url: str, **options: Any) -> Any:
    from playwright.sync_api import Error

    for attempt in range(3):
        try:
            return goto(url, **options)
        except Error as exc:
            if "ERR_NETWORK_CHANGED" not in str(exc) or attempt == 2:
                raise
            print(f"navigation to {url} failed with a network change; again")
    raise AssertionError("unreachable")


def fetch_outside_chromium(route: Any) -> None:
    """A page's scripts and styles, fetched by Playwright rather than Chromium's network stack.

    Chromium fails every request in flight with net::ERR_NETWORK_CHANGED when an interface
    comes or goes on the machine, and the twohost tests make and remove network namespaces
    and veth pairs beside these tests: a page whose script failed that way stays blank (CI:
    the incident page's incident.js). The files come from the collector all the same; the
    pages' own API reads still go through Chromium (and are retried by the pages)."""
    from playwright.sync_api import Error

    response, error = None, None
    for _ in range(3):
        try:
            response = route.fetch()
            break
        except Error as exc:  # the connection failed
            error = exc
    try:
        if response is not None:
            route.fulfill(response=response)
        else:
            print(f"static file not fetched: {route.request.url}: {error}")
            route.abort("failed")
    except Error:  # the page closed (its test ended) while its file was on the way
        pass


def login(page: Any, base: str, path: str = "/", token: str = ADMIN_TOKEN) -> None:
    """Log in through the form, landing on ``path``."""
    page.goto(f"{base}{path}")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{path}")


@pytest.fixture
def page(browser: Any, live_collector: LiveCollector) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.console_errors = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))
    log = browser_log(pg)
    yield pg
    context.close()
    # Shown with a failing test's report: what the page said and which requests went wrong.
    print("browser log:", *log, sep="\n  ")


def browser_log(pg: Any) -> list[str]:
    """Every console message, page error, failed request and error answer of ``pg``, timed."""
    log: list[str] = []
    start = time.monotonic()

    def add(what: str) -> None:
        log.append(f"{time.monotonic() - start:7.2f} s {what}")

    pg.on("console", lambda m: add(f"console.{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: add(f"page error: {e}"))
    pg.on("requestfailed", lambda r: add(f"request failed: {r.method} {r.url}: {r.failure}"))
    pg.on("response", lambda r: r.status >= 400 and add(f"HTTP {r.status}: {r.url}"))
    pg.on("framenavigated", lambda f: f == pg.main_frame and add(f"navigated: {f.url}"))
    return log


def fail_first(page: Any, pattern: str, fail: Callable[[Any], None]) -> list[str]:
    """The page's first request matching ``pattern`` goes to ``fail(route)`` (a connection
    dropped, an error answer), the later ones to the collector; returns the URLs failed."""
    failed: list[str] = []

    def handle(route: Any) -> None:
        if failed:
            route.continue_()
        else:
            failed.append(route.request.url)
            fail(route)

    page.route(pattern, handle)
    return failed


def drop_connection(route: Any) -> None:
    route.abort("connectionreset")


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


class AgentFeed:
    """The host's agent during a matrix run, over real HTTP ingest: a sample every 0.2 s and the
    kernel record the stand-in appends to its kmsg file, stamped when it was written."""

    def __init__(self, lc: LiveCollector, kmsg: Path, seq0: int = 10_000) -> None:
        self.lc, self.kmsg, self.seq = lc, kmsg, seq0
        self.kernel_ts: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._client = httpx.Client(
            base_url=lc.base_url, headers={"Authorization": f"Bearer {lc.token}"}, timeout=30
        )

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.seq += 1
            lines = []
            if self.kernel_ts is None and self.kmsg.exists():
                prefix, text = self.kmsg.read_text().strip().split(";", 1)
                self.kernel_ts = self.kmsg.stat().st_mtime
                lines.append(
                    {
                        "seq": self.seq,
                        "ts": self.kernel_ts,
                        "source": "kmsg",
                        "priority": 3,
                        "facility": 0,
                        "kseq": int(prefix.split(",")[1]),
                        "text": text,
                    }
                )
            body = {
                "host": HOST,
                "boot_id": BOOT,
                "agent": {"version": "0.1.0"},
                "samples": [sample(self.seq, time.time())],
                "lines": lines,
                "events": [],
            }
            self._client.post(INGEST_PATH, json=body).raise_for_status()

    def __enter__(self) -> AgentFeed:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()


@dataclass
class MatrixRunDone:
    run_id: int
    run: dict[str, Any]
    kernel_ts: float | None


@pytest.fixture(scope="session")
def matrix_run(
    live_collector: LiveCollector, sshd: Any, tmp_path_factory: pytest.TempPathFactory
) -> MatrixRunDone:
    """A finished two-profile matrix run (X with MTP, whose stand-in logs an NV_ERR kernel line
    during startup; Y without, asking for an fp8 KV cache and a 0.7 memory share that the
    host's launch script overrides to 0.6) on the browser collector's host, started through
    the API."""
    from sqlalchemy import create_engine, update

    from collector.models import Host
    from tests.collector.matrix.test_runner import behind_launch_script, standin_spec
    from tests.support.ports import free_port

    lc = live_collector
    target = sshd.target()
    engine = create_engine(lc.db_url)
    with engine.begin() as conn:  # SSH columns set directly, as tests/collector/matrix does
        conn.execute(
            update(Host)
            .where(Host.name == HOST)
            .values(
                ssh_user=target.user,
                ssh_host=target.host,
                ssh_port=target.port,
                ssh_key_path=str(target.key_path),
                ssh_host_key=target.known_host_key,
            )
        )
    engine.dispose()
    marker = f"fw-browser-{uuid.uuid4().hex[:12]}"
    kmsg = tmp_path_factory.mktemp("matrix") / "kmsg"
    spec = {**standin_spec(free_port(), marker, kmsg, max_turns=6), "host": HOST}
    spec = behind_launch_script(spec, kmsg.parent)
    spec["profiles"]["Y"] = {"set": {"--kv-cache-dtype": "fp8", "--gpu-memory-utilization": "0.7"}}
    spec["name"] = "standin-sweep"
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with AgentFeed(lc, kmsg) as feed, httpx.Client(base_url=lc.base_url, headers=admin) as api:
        created = api.post("/api/v1/matrix-runs", json={"spec": spec})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        deadline = time.monotonic() + 90
        while True:
            run = api.get(f"/api/v1/matrix-runs/{run_id}").json()
            if run["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline, f"matrix run still {run['status']}"
            time.sleep(0.3)
    return MatrixRunDone(run_id, run, feed.kernel_ts)


@dataclass
class RealIncident:
    id: int
    last_sample_ts: float
    xid_ts: float
    detail: dict[str, Any]


def _wait_for(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _set_ssh(db_url: str, host: str, target: Any) -> None:
    """SSH columns set directly (as tests/collector/matrix does): no key fetch over the API."""
    from sqlalchemy import create_engine, update

    from collector.models import Host

    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(
            update(Host)
            .where(Host.name == host)
            .values(
                ssh_user=target.user,
                ssh_host=target.host,
                ssh_port=target.port,
                ssh_key_path=str(target.key_path),
                ssh_host_key=target.known_host_key,
            )
        )
    engine.dispose()


@pytest.fixture(scope="session")
def real_incident(live_collector: LiveCollector, sshd: Any) -> RealIncident:
    """SIM_HOST posts 150 s of samples with an Xid 79 line, then goes silent: the collector's
    checker (grace 1 s, a vLLM probe that is refused, no SSH) opens an ``unreachable``
    incident. Then SSH is configured and the host returns on a new boot: ``rebooted``, the
    post-mortem runs over SSH (pstore file placed by the fixture) and both incident alerts
    reach a receiver that refuses the first attempt of ``incident.opened``."""
    from tests.collector.freeze_support import receiver
    from tests.support.ports import free_port

    lc = live_collector
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    agent = {"Authorization": f"Bearer {lc.sim_token}"}
    with (
        receiver(secret=None) as rec,
        httpx.Client(base_url=lc.base_url, headers=admin, timeout=30) as api,
    ):
        take, refused = rec.handle, []

        def refuse_first_opened(body: bytes, headers: dict[str, str]) -> int:
            if b"incident.opened" in body and not refused:
                refused.append(body)
                return 503
            return take(body, headers)

        rec.handle = refuse_first_opened  # type: ignore[method-assign]
        hook = api.post("/api/v1/webhooks", json={"url": rec.url})
        assert hook.status_code == 201, hook.text
        patched = api.patch(
            f"/api/v1/hosts/{SIM_HOST}",
            json={"grace_s": 1, "vllm_url": f"http://127.0.0.1:{free_port()}"},
        )
        assert patched.status_code == 200, patched.text
        last = time.time()
        xid_ts = last - 3.25
        body = {
            "host": SIM_HOST,
            "boot_id": SIM_BOOT_A,
            "agent": {"version": "0.1.0", "pid": 77, "started_at": last - 600},
            "samples": [sample(i + 1, last - 149 + i) for i in range(150)],
            "lines": [
                {
                    "seq": 1,
                    "ts": last - 20.0,
                    "source": "journal",
                    "priority": 6,
                    "text": 'vllm[3141]: INFO: 10.0.0.7 - "POST /v1/completions HTTP/1.1" 200 OK',
                },
                {
                    "seq": 2,
                    "ts": xid_ts,
                    "source": "kmsg",
                    "priority": 3,
                    "facility": 0,
                    "kseq": 2001,
                    "text": XID_79,
                },
            ],
            "events": [],
        }
        httpx.post(f"{lc.base_url}{INGEST_PATH}", json=body, headers=agent).raise_for_status()

        def opened() -> dict[str, Any] | None:
            found = api.get("/api/v1/incidents", params={"host": SIM_HOST}).json()
            return found[0] if found else None

        incident = _wait_for("the checker to open an incident", opened)
        assert (incident["kind"], incident["state"]) == ("unreachable", "open"), incident
        _set_ssh(lc.db_url, SIM_HOST, sshd.target())
        # Back for good: the return's heartbeat must not start another 1 s countdown.
        api.patch(f"/api/v1/hosts/{SIM_HOST}", json={"grace_s": 86400}).raise_for_status()
        back = {
            **body,
            "boot_id": SIM_BOOT_B,
            "agent": {"version": "0.1.0", "pid": 78, "started_at": time.time()},
            "samples": [sample(1, time.time())],
            "lines": [],
        }
        httpx.post(f"{lc.base_url}{INGEST_PATH}", json=back, headers=agent).raise_for_status()

        def settled() -> dict[str, Any] | None:
            detail = api.get(f"/api/v1/incidents/{incident['id']}").json()
            done = (
                detail["postmortem"]["state"] in ("done", "failed")
                and len(detail["deliveries"]) == 2
                and all(d["state"] == "delivered" for d in detail["deliveries"])
            )
            return detail if done else None

        detail = _wait_for("the post-mortem and both alerts", settled)
    return RealIncident(incident["id"], last, xid_ts, detail)


FROZEN_HOST = "spark-frozen"
FROZEN_GRACE_S = 5  # a loaded test machine may delay a batch by a second or two, not five
LOCKUP = "watchdog: BUG: soft lockup - CPU#3 stuck for 23s!"


@dataclass
class SimFreeze:
    """A simulated Spark (tests.support.simhost: a real agent, the vLLM stand-in) that cold-
    starts, logs a soft lockup, freezes for ``freeze_s`` and reboots once."""

    id: int
    lc: LiveCollector
    lockup_ts: float

    def api(self, path: str, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        resp = httpx.get(f"{self.lc.base_url}{path}", params=params, headers=headers, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def resolved(self) -> dict[str, Any]:
        """The incident once resolved and its post-mortem settled (it has no SSH: failed)."""

        def done() -> dict[str, Any] | None:
            detail = self.api(f"/api/v1/incidents/{self.id}")
            settled = detail["postmortem"]["state"] in ("failed", "done")
            return detail if detail["state"] == "resolved" and settled else None

        return _wait_for("the simulated host back and its post-mortem settled", done, 120)


@pytest.fixture(scope="session")
def sim_freeze(
    live_collector: LiveCollector, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimFreeze]:
    """Yields while the simulated host is frozen and its incident open (about 30 s remain)."""
    require(Path(CHROMIUM).exists(), f"{CHROMIUM} missing (apt-get install chromium)")
    lc = live_collector
    env = {**os.environ, "FREEZEWATCH_DB_URL": lc.db_url}
    added = subprocess.run(
        [sys.executable, "-m", "collector", "add-host", FROZEN_HOST, "--simulated",
         "--grace", str(FROZEN_GRACE_S)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    token = added.stdout.strip().splitlines()[-1]
    data = tmp_path_factory.mktemp("simfreeze")
    argv = [
        sys.executable, "-m", "tests.support.simhost", "--collector", lc.base_url,
        "--token", token, "--host-name", FROZEN_HOST, "--data-dir", str(data),
        "--first-freeze", "15", "--freeze-every", "0", "--freeze-seconds", "40",
        "--load-seconds", "3",
    ]  # fmt: skip
    with open(data / "simhost.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    sim = SimFreeze(0, lc, 0.0)
    try:

        def lockup() -> float | None:
            found = sim.api(f"/api/v1/hosts/{FROZEN_HOST}/events", kind="soft_lockup")["events"]
            return found[-1]["ts"] if found else None

        sim.lockup_ts = _wait_for("the soft lockup line", lockup, 90)

        def opened() -> int | None:
            found = sim.api("/api/v1/incidents", host=FROZEN_HOST)
            frozen = [i for i in found if i["start"] >= sim.lockup_ts - FROZEN_GRACE_S]
            return frozen[0]["id"] if frozen and frozen[0]["state"] == "open" else None

        sim.id = _wait_for("the freeze's incident", opened, 30)
        yield sim
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
