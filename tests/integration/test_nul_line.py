"""A NUL character in a vLLM log line (a synthetic test input, not a real vLLM line), through
the real agent and the real collector with its liveness checker running, on SQLite and
PostgreSQL: the line is stored escaped, the host stays ``up`` and no incident opens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from collector import db
from collector.hosts import registry as hosts
from collector.models import Host, Incident, Line
from collector.schemas import unescape_nul
from tests.integration.test_agent_collector import HOST, start_agent, wait_for
from tests.support.fleet import CollectorProcess

pytestmark = pytest.mark.timeout(120)
NUL_LINE = "INFO 05-01 12:00:00 [logger.py:42] prompt: 'tool\x00call' (test input)"


def test_a_nul_vllm_line_is_stored_and_raises_no_false_alarm(db_url: str, tmp_path: Path) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    factory = db.make_sessionmaker(engine)
    with db.session_scope(factory) as session:
        _host, token = hosts.create_host(session, name=HOST)
    vllm_log = tmp_path / "vllm.log"
    vllm_log.write_text("INFO before\n")
    collector = CollectorProcess(db_url, tmp_path / "collector.log")
    collector.start()
    (tmp_path / "kmsg").write_bytes(b"")
    agent = start_agent(collector, token, tmp_path, "--vllm-log", str(vllm_log))
    try:

        def status() -> str | None:
            with db.session_scope(factory) as session:
                host = session.scalar(select(Host).where(Host.name == HOST))
                return host.status if host else None

        wait_for(lambda: status() == "up")

        def stored() -> list[Line]:
            with db.session_scope(factory) as session:
                rows = session.scalars(select(Line).where(Line.source == "vllm").order_by(Line.id))
                return list(rows)

        def probe_stored() -> bool:
            # The agent follows the log from its end once its follower has opened it (which
            # may come after the first heartbeat): append probes until one arrives.
            with open(vllm_log, "a", encoding="utf-8") as f:
                f.write("INFO probe\n")
            return any(line.text == "INFO probe" for line in stored())

        wait_for(probe_stored)
        with open(vllm_log, "a", encoding="utf-8") as f:
            f.write(NUL_LINE + "\nINFO after\n")
        wait_for(lambda: any(line.text == "INFO after" for line in stored()))
        time.sleep(3 * 3.0)  # three grace periods of the checker: the host must stay up
        assert status() == "up"
        with db.session_scope(factory) as session:
            assert session.scalar(select(func.count()).select_from(Incident)) == 0
        nul = [line for line in stored() if line.escaped]
        assert [unescape_nul(line.text) for line in nul] == [NUL_LINE]
        assert not (tmp_path / "state" / "dead-letter.jsonl").exists()
    finally:
        agent.terminate()
        agent.wait(20)
        collector.stop()
        engine.dispose()
