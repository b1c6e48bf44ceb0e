"""A matrix run's kernel counts read the host's stored records as the live path stores events:
a line restating a report counted before it (an SError's panic, an Xid 79's fall line, an
SXid's dump) is no second event of the run."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select

from collector import db
from collector.matrix.collect import kernel_findings
from collector.models import Host
from tests.collector.conftest import Collector
from tests.collector.kernel.test_restated import (
    GPUD,
    NONFATAL,
    SERROR,
    T0,
    events,
    oopses,
    real_lines,
    records,
    send,
)


def findings(c: Collector, host: str) -> tuple[dict[str, int], dict[str, str] | None]:
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        host_id = session.scalars(select(Host.id).where(Host.name == host)).one()
        return kernel_findings(session, host_id=host_id, start=T0, end=T0 + 10**8)


def test_an_serror_line_and_its_panic_are_one_oops_of_the_run(collector: Collector) -> None:
    """The real rockpro64 SError report (lore): its SError line, the registers, then the
    'Asynchronous SError Interrupt' panic, stored by the agent's batches as the live path
    stores them: one oops there, one in the run's counts."""
    send(collector, "rock", [SERROR])
    assert oopses(collector, "rock") == [("oops", "serror", "fatal")]
    counts, advice = findings(collector, "rock")
    assert counts == {"oops": 1}
    assert advice == {"severity": "fatal", "action": "reboot"}


def test_an_serror_panic_alone_is_an_oops_of_the_run(collector: Collector) -> None:
    """Its SError line lost: the panic is the run's oops."""
    send(collector, "panic", [SERROR[22:]])
    assert findings(collector, "panic")[0] == {"oops": 1}


@pytest.mark.parametrize("report", ["nvtrust", "gpud"])
def test_a_runs_gpu_fault_counts_are_the_events_the_live_path_stored(
    collector: Collector, report: str
) -> None:
    """Real reports (tests/fixtures/real/kernel): nvswitch3's three SXid 22013 verdicts with
    their dumps; gpud's Xid 79 with its fall line and three NVSwitches' SXid 20034 reports."""
    recs = NONFATAL if report == "nvtrust" else records(real_lines(GPUD))
    send(collector, report, [recs])
    stored = Counter(kind for kind, *_ in events(collector, report))
    assert stored and findings(collector, report)[0] == dict(stored)
