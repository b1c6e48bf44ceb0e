"""The checker's tick costs the same whatever is stored: it reads the hosts by their indexed
``overdue_at`` and never the samples or lines, so a year of data does not slow detection.

Counted, not timed: the statements one tick sends (SQLite and PostgreSQL), with a few rows
stored and after tens of thousands more.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, func, select, update

from collector import db
from collector.incidents.lifecycle import settle_incidents
from collector.liveness import checker, suspects
from collector.liveness.collector_runs import release_held_alerts
from collector.liveness.preprobes import PreProbes
from collector.models import Host, Line, Sample
from collector.timeutil import utcnow
from tests.collector.conftest import Collector
from tests.collector.freeze_support import factory, kline, post, sample
from tests.collector.liveness.test_checker import no_probes

HOSTS = [f"spark-{i:02d}" for i in range(12)]
_LITERALS = re.compile(r"'[^']*'|\b\d+(\.\d+)?\b")


@contextmanager
def statements(c: Collector) -> Iterator[list[str]]:
    """Every statement the engine sends meanwhile, literals blanked (times differ per tick)."""
    engine = c.client.app.state.engine  # type: ignore[attr-defined]
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        seen.append(_LITERALS.sub("?", " ".join(sql.split())))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def tick(c: Collector, pre: PreProbes) -> Callable[[], None]:
    """What the scheduler's check job runs, every 0.25 s."""
    sf, settings = factory(c), c.settings

    def run() -> None:
        now = utcnow()
        suspects.start_pre_probes(sf, now=now, settings=settings, pre_probes=pre, run=no_probes)
        checker.check_heartbeats(
            sf, now=now, settings=settings, probe_runner=no_probes, pre_probes=pre
        )
        settle_incidents(sf, now=now, settings=settings)
        release_held_alerts(sf, now=now, settings=settings)

    return run


def stored(c: Collector) -> tuple[int, int]:
    with db.session_scope(factory(c)) as s:
        samples = s.scalar(select(func.count()).select_from(Sample))
        lines = s.scalar(select(func.count()).select_from(Line))
    return int(samples or 0), int(lines or 0)


def test_a_tick_sends_the_same_statements_with_few_rows_and_with_many(
    collector: Collector,
) -> None:
    tokens = {name: collector.add_host(name) for name in HOSTS}
    with db.session_scope(factory(collector)) as s:  # none turns suspect on a slow machine
        s.execute(update(Host).values(grace_s=3600.0))
    t0 = time.time()
    for name, token in tokens.items():
        post(collector, token, name, samples=[sample(1, t0)], lines=[kline(1, t0, "hello")])
    pre = PreProbes()
    run = tick(collector, pre)
    try:
        run()  # warm: the first tick may look things up once
        with statements(collector) as few:
            run()
        assert stored(collector) == (len(HOSTS), len(HOSTS))

        # Tens of thousands of samples and lines later (the hosts heard from meanwhile).
        token = tokens[HOSTS[0]]
        for b in range(10):
            seq = 2 + b * 2000
            lines = [kline(seq + i, t0 + i / 1000, f"NVRM: chatter {i}") for i in range(2000)]
            samples = [sample(seq + i, t0 + i / 1000) for i in range(1000)]
            post(collector, token, HOSTS[0], samples=samples, lines=lines)
        for name, token in tokens.items():
            post(collector, token, name)
        samples_n, lines_n = stored(collector)
        assert samples_n > 100 * len(HOSTS) and lines_n > 1000 * len(HOSTS)
        run()
        with statements(collector) as many:
            run()
    finally:
        pre.shutdown()
    assert many == few
    touched = [sql for sql in few if re.search(r"\b(FROM|JOIN|INTO|UPDATE) (samples|lines)\b", sql)]
    assert touched == []
    assert any("overdue_at" in sql for sql in few)  # the due hosts come from the index
